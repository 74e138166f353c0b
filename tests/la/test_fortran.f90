! The library called from Fortran as the README shows: ONESIDED_PDGEMM with
! PDGEMM's arguments, ONESIDED_PDGETRF_NOPIV with PDGETRF's less IPIV, on a
! 1 x P BLACS grid, N = 37 in blocks of 5 (N not a multiple of the block).
! Checked against ScaLAPACK's PDGEMM and PDGETRF on the same data (the
! matrix is diagonally dominant by columns, where PDGETRF swaps no rows).
program test_fortran
  implicit none
  integer, parameter :: n = 37, nb = 5
  integer :: iam, nprocs, ictxt, nprow, npcol, myrow, mycol, info, info2
  integer :: locr, locc, lld, i, j, gi, gj, failed
  integer :: desca(9)
  integer, allocatable :: ipiv(:)
  double precision, allocatable :: a(:,:), b(:,:), c(:,:), r(:,:), f(:,:)
  double precision :: err, bound
  integer, external :: numroc, indxl2g

  call blacs_pinfo(iam, nprocs)
  nprow = 1
  npcol = nprocs
  call blacs_get(-1, 0, ictxt)
  call blacs_gridinit(ictxt, 'Row-major', nprow, npcol)
  call blacs_gridinfo(ictxt, nprow, npcol, myrow, mycol)
  locr = numroc(n, nb, myrow, 0, nprow)
  locc = numroc(n, nb, mycol, 0, npcol)
  lld = max(1, locr)
  call descinit(desca, n, n, nb, nb, 0, 0, ictxt, lld, info)
  allocate(a(lld, max(1, locc)), b(lld, max(1, locc)), c(lld, max(1, locc)))
  allocate(r(lld, max(1, locc)), f(lld, max(1, locc)), ipiv(locr + nb))
  do j = 1, locc
    gj = indxl2g(j, nb, mycol, 0, npcol)
    do i = 1, locr
      gi = indxl2g(i, nb, myrow, 0, nprow)
      a(i, j) = sin(dble(gi * 7 + gj * 3))
      b(i, j) = cos(dble(gi * 5 - gj * 2))
    end do
  end do
  failed = 0

  ! C = A B^T, and the same with ScaLAPACK's PDGEMM.
  c = 0.0d0
  r = 0.0d0
  call onesided_pdgemm('N', 'T', n, n, n, 1.0d0, a, 1, 1, desca, b, 1, 1, desca, 0.0d0, c, &
                       1, 1, desca)
  call pdgemm('N', 'T', n, n, n, 1.0d0, a, 1, 1, desca, b, 1, 1, desca, 0.0d0, r, 1, 1, desca)
  err = 0.0d0
  if (locc > 0) err = maxval(abs(c(1:locr, 1:locc) - r(1:locr, 1:locc)))
  bound = 8.0d0 * (n + 1) * epsilon(1.0d0) * n
  if (.not. (err <= bound)) then
    print '(a, i0, a, es10.3, a, es10.3)', 'FAIL onesided_pdgemm on process ', iam, &
      ': max difference ', err, ' > ', bound
    failed = failed + 1
  end if

  ! LU without pivoting of A + 4n I, against PDGETRF (which pivots nothing here).
  do j = 1, locc
    gj = indxl2g(j, nb, mycol, 0, npcol)
    do i = 1, locr
      gi = indxl2g(i, nb, myrow, 0, nprow)
      if (gi == gj) a(i, j) = a(i, j) + 4.0d0 * n
    end do
  end do
  f = a
  call onesided_pdgetrf_nopiv(n, n, a, 1, 1, desca, info)
  call pdgetrf(n, n, f, 1, 1, desca, ipiv, info2)
  err = 0.0d0
  if (locc > 0) err = maxval(abs(a(1:locr, 1:locc) - f(1:locr, 1:locc)))
  bound = 64.0d0 * n * epsilon(1.0d0) * 4.0d0 * n
  if (info /= 0 .or. info2 /= 0 .or. .not. (err <= bound)) then
    print '(a, i0, a, i0, a, i0, a, es10.3)', 'FAIL onesided_pdgetrf_nopiv on process ', iam, &
      ': info ', info, ' (pdgetrf ', info2, '), max difference ', err
    failed = failed + 1
  end if

  call igsum2d(ictxt, 'All', ' ', 1, 1, failed, 1, -1, -1)
  if (iam == 0) print '(a, i0, a, i0, a)', 'test_fortran: ', failed, ' failed (', nprocs, &
    ' processes)'
  call blacs_gridexit(ictxt)
  call blacs_exit(0)
end program test_fortran
