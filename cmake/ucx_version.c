/* Prints the version of the libucp this program loads: configure runs it
 * against the host MPI's UCX (cmake/HostMPI.cmake). */
#include <stdio.h>
#include <ucp/api/ucp.h>

int main(void)
{
    printf("%s", ucp_get_version_string());
    return 0;
}
