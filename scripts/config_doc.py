#!/usr/bin/env python3
"""The tunables table of docs/configuration.md, from the library itself.

    ONESIDED_HELP=1 onesided-run -n 1 PROGRAM | config_doc.py --check docs/configuration.md
    ONESIDED_HELP=1 onesided-run -n 1 PROGRAM | config_doc.py --write docs/configuration.md

Reads what ONESIDED_HELP=1 prints (os_config_print: the one table,
OS_CONFIG_TABLE) and renders it as the Markdown table between the page's
'<!-- tunables -->' and '<!-- /tunables -->' lines. --check fails (status 1,
with a diff) when the page's table differs, so the page cannot drift from
the code; --write replaces it.
"""
import difflib
import re
import sys

BEGIN, END = "<!-- tunables -->", "<!-- /tunables -->"


def parse(text):
    """[(variable, info key or '', default, help)] in the library's order."""
    rows, cur = [], None
    for line in text.splitlines():
        m = re.match(r"^  (ONESIDED_\w+)(?: / (\w+))?: \S+ \[(.*)\]$", line)
        if m:
            cur = [m.group(1), m.group(2) or "", m.group(3), ""]
            rows.append(cur)
        elif cur and line.startswith("      "):
            cur[3] = (cur[3] + " " + line.strip()).strip()
        elif line.strip() and not line.startswith("onesided tunables"):
            cur = None  # the program's own output
    return rows


def render(rows):
    cell = lambda s: s.replace("|", "\\|")
    out = ["| environment | window info key | default | meaning |", "|---|---|---|---|"]
    for var, key, default, help_text in rows:
        out.append("| `%s` | %s | %s | %s |" % (var, "`%s`" % key if key else "",
                                                  cell(default), cell(help_text)))
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("--check", "--write"):
        sys.exit(__doc__)
    mode, page = sys.argv[1], sys.argv[2]
    rows = parse(sys.stdin.read())
    if not rows:
        sys.exit("config_doc: no tunables in the input (run the program with ONESIDED_HELP=1)")
    lines = open(page).read().split("\n")
    try:
        b, e = lines.index(BEGIN), lines.index(END)
    except ValueError:
        sys.exit("config_doc: %s has no %s ... %s block" % (page, BEGIN, END))
    want, have = render(rows), lines[b + 1:e]
    if mode == "--write":
        open(page, "w").write("\n".join(lines[:b + 1] + want + lines[e:]))
        print("config_doc: %d tunables written to %s" % (len(rows), page))
        return
    if have != want:
        sys.stdout.writelines(difflib.unified_diff(
            [l + "\n" for l in have], [l + "\n" for l in want], page, "ONESIDED_HELP=1"))
        sys.exit("config_doc: %s differs from the library's %d tunables; regenerate it with --write"
                 % (page, len(rows)))
    print("config_doc: %s lists the library's %d tunables" % (page, len(rows)))


if __name__ == "__main__":
    main()
