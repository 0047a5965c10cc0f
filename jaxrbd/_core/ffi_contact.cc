// jaxrbd's native contact solve: one state's frictional contact problem as a single XLA FFI
// call (`jaxrbd.ground._solvers.solve` for a model of traversal "kernel").
//
// The problem and the algorithms are those of jaxrbd/ground/_solvers.py, mirrored step by
// step so that the iterates, the checks and the returned impulses are the XLA program's
// up to rounding: ``u = A lam + c`` per contact [n, t1, t2]; projected Gauss-Seidel or
// ADMM with De Saxce's correction and residual balancing (Carpentier et al. 2024, Boyd et
// al. 2011), checked every CHECK_EVERY iterations against the natural residual, with a
// semismooth Newton polish on ``lam - F(lam) = 0`` (F the staggered projection map, its
// Jacobian the one `jax.jacfwd` takes, ties of max(0, x) at 1/2) solved by Gaussian
// elimination with partial pivoting, and the chain of Newton steps that ends a solve left
// above the tolerance. NaNs propagate as in the XLA program (jnp.maximum,
// jnp.minimum, jnp.max and jnp.argmax all return or pick NaN). A second handler solves a
// batch of such problems one after the other (the `jax.vmap` of one problem's call).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int kCheckEvery = 10;  // _solvers.CHECK_EVERY
constexpr int kNewtonSteps = 20;  // _solvers.NEWTON_STEPS
constexpr double kRhoBalance = 10.0, kRhoFactor = 2.0, kRhoRange = 1e4;

// jnp.maximum / jnp.minimum: NaN wins.
inline double jmax(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return a > b ? a : b;
}
inline double jmin(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return a < b ? a : b;
}

// y = M x + y for M (m, m) given as its transpose Mt (row j of Mt = column j of M): a
// column at a time, so that the loop over rows vectorizes while every y[i] still sums
// its terms in the order of a row's dot product (j ascending), the rounding of the
// plain loop.
inline void gemv_t(int m, const double* Mt, const double* x, double* y) {
  for (int j = 0; j < m; ++j) {
    const double xj = x[j];
    const double* col = Mt + j * m;
    for (int i = 0; i < m; ++i) y[i] += col[i] * xj;
  }
}

// A per-thread buffer of n copies of x, reused from call to call (Slot tells the buffers
// apart): a solve allocates nothing once its thread has solved a problem as large, where
// allocations would cost as much as a small problem's iterations. A thread solves one
// problem at a time, and each buffer has one role in it.
template <int Slot>
std::vector<double>& scratch(size_t n, double x = 0.0) {
  thread_local std::vector<double> buffer;
  buffer.assign(n, x);
  return buffer;
}

struct Problem {
  int m, K;
  const double* A;  // (m, m) row-major
  const double* c;
  const double* mu;
  std::vector<double>&rn, &rt;  // _solvers.steps
  std::vector<double>& At;      // A transposed (`gemv_t`)

  Problem(int m_, const double* A_, const double* c_, const double* mu_)
      : m(m_), K(m_ / 3), A(A_), c(c_), mu(mu_), rn(scratch<0>(m_ / 3)), rt(scratch<1>(m_ / 3)),
        At(scratch<2>(m_ * m_)) {
    for (int k = 0; k < K; ++k) {
      rn[k] = 1.0 / A[(3 * k) * m + 3 * k];
      rt[k] = 2.0 / (A[(3 * k + 1) * m + 3 * k + 1] + A[(3 * k + 2) * m + 3 * k + 2]);
    }
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < m; ++j) At[j * m + i] = A[i * m + j];
  }

  // u = A x + c
  void velocity(const double* x, double* u) const {
    for (int i = 0; i < m; ++i) u[i] = c[i];
    gemv_t(m, At.data(), x, u);
  }

  // _solvers.fixed_point_map; u = A lam + c on return
  void fixed_point(const double* lam, double* out, double* u) const {
    velocity(lam, u);
    for (int k = 0; k < K; ++k) {
      const double ln = jmax(0.0, lam[3 * k] - rn[k] * u[3 * k]);
      double v1 = lam[3 * k + 1] - rt[k] * u[3 * k + 1];
      double v2 = lam[3 * k + 2] - rt[k] * u[3 * k + 2];
      const double rho = mu[k] * ln;
      const double n2 = v1 * v1 + v2 * v2;
      const double scale = n2 > rho * rho ? rho / std::sqrt(n2) : 1.0;
      out[3 * k] = ln;
      out[3 * k + 1] = v1 * scale;
      out[3 * k + 2] = v2 * scale;
    }
  }

  // _solvers.natural_residual
  double residual(const double* lam, double* F, double* u) const {
    fixed_point(lam, F, u);
    double r = 0.0;
    for (int k = 0; k < K; ++k) {
      r = jmax(r, std::fabs((lam[3 * k] - F[3 * k]) / rn[k]));
      r = jmax(r, std::fabs((lam[3 * k + 1] - F[3 * k + 1]) / rt[k]));
      r = jmax(r, std::fabs((lam[3 * k + 2] - F[3 * k + 2]) / rt[k]));
    }
    return r;
  }
};

// _solvers.project_cone of one contact, in place
void project_cone(double* l, double mu) {
  const double n = l[0], t1 = l[1], t2 = l[2];
  const double n2 = t1 * t1 + t2 * t2;
  const bool pos = n2 > 0;
  const double s = pos ? std::sqrt(n2) : 0.0;
  if (s <= mu * n) return;  // inside
  if (mu * s <= -n) {       // polar cone
    l[0] = l[1] = l[2] = 0.0;
    return;
  }
  const double alpha = (n + mu * s) / (1.0 + mu * mu);
  const double d = pos ? s : 1.0;
  l[0] = alpha;
  l[1] = mu * alpha * (t1 / d);
  l[2] = mu * alpha * (t2 / d);
}

// _solvers.lu_solve: x = M^-1 b by elimination with partial pivoting; M (n, n) is
// overwritten, b too.
void lu_solve(int n, double* M, double* b, double* x) {
  for (int k = 0; k < n; ++k) {
    int p = k;
    double best = -1.0;
    for (int i = k; i < n; ++i) {
      const double a = std::fabs(M[i * n + k]);
      if (std::isnan(a)) {
        p = i;
        break;
      }
      if (a > best) best = a, p = i;
    }
    if (p != k) {
      for (int j = 0; j < n; ++j) std::swap(M[k * n + j], M[p * n + j]);
      std::swap(b[k], b[p]);
    }
    double piv = M[k * n + k];
    if (piv == 0) piv = DBL_MIN;
    for (int i = k + 1; i < n; ++i) {
      const double f = M[i * n + k] / piv;
      // columns <= k are never read again (the pivots come from column k + 1 on, the
      // back substitution reads right of the diagonal): the update leaves them
      for (int j = k + 1; j < n; ++j) M[i * n + j] -= f * M[k * n + j];
      b[i] -= f * b[k];
    }
  }
  for (int k = n - 1; k >= 0; --k) {
    double piv = M[k * n + k];
    if (piv == 0) piv = DBL_MIN;
    double s = b[k];
    for (int j = k + 1; j < n; ++j) s -= M[k * n + j] * x[j];
    x[k] = s / piv;
  }
}

// (A + rho I)^-1 by Cholesky (a failed factor leaves NaNs, as LAPACK's under jax). Every
// step runs as row updates y += f x along contiguous rows, which vectorize, rather than
// as dot products, whose chain of dependent additions does not. Each entry sums the
// terms of the dot product in its order (k ascending); where the compiler fuses the
// multiply-adds differently, the rounding differs from the dot-product form's.
void inverse(const Problem& P, double rho, std::vector<double>& Minv, std::vector<double>& U) {
  const int m = P.m;
  // U = L^T (row j of U = column j of L), right-looking: after column j is final, its
  // outer product leaves the trailing rows
  for (int i = 0; i < m; ++i)
    for (int j = i; j < m; ++j) U[i * m + j] = P.A[j * m + i] + (i == j ? rho : 0.0);
  for (int j = 0; j < m; ++j) {
    double* uj = U.data() + j * m;
    const double d = std::sqrt(uj[j]);
    uj[j] = d;
    for (int c = j + 1; c < m; ++c) uj[c] /= d;
    for (int i = j + 1; i < m; ++i) {
      const double f = uj[i];
      double* ui = U.data() + i * m;
      for (int c = i; c < m; ++c) ui[c] -= f * uj[c];
    }
  }
  // N = L^-1 (lower triangular, row-major), a row at a time from the rows above it:
  // N[i] = (e_i - sum_k L[i][k] N[k]) / L[i][i]
  std::vector<double>& N = scratch<3>(static_cast<size_t>(m) * m);
  for (int i = 0; i < m; ++i) {
    double* ni = N.data() + i * m;
    for (int k = 0; k < i; ++k) {
      const double f = U[k * m + i];
      const double* nk = N.data() + k * m;
      for (int j = 0; j <= k; ++j) ni[j] -= f * nk[j];
    }
    const double d = U[i * m + i];
    for (int j = 0; j < i; ++j) ni[j] /= d;
    ni[i] = 1.0 / d;
  }
  // the lower half of L^-T L^-1 = sum_k N[k]^T N[k], mirrored: m^3 / 3 instead of m full
  // solves' m^3
  std::fill(Minv.begin(), Minv.end(), 0.0);
  for (int k = 0; k < m; ++k) {
    const double* nk = N.data() + k * m;
    for (int i = 0; i <= k; ++i) {
      const double f = nk[i];
      double* mi = Minv.data() + i * m;
      for (int j = 0; j <= i; ++j) mi[j] += f * nk[j];
    }
  }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < i; ++j) Minv[j * m + i] = Minv[i * m + j];
}

struct Solver {
  const Problem& P;
  const bool admm, adaptive;
  const int m;
  // ADMM state (z the impulses; PGS keeps its impulses in z too)
  std::vector<double>&z, &y, &Minv, &U, &x, &u, &w;
  double rho = 0, rho0 = 0, dbar = 0, r_p = 0, r_d = 0;

  Solver(const Problem& P_, bool admm_, bool adaptive_, double rho_scale, const double* lam0)
      : P(P_), admm(admm_), adaptive(adaptive_), m(P_.m), z(scratch<4>(P_.m)),
        y(scratch<5>(P_.m)), Minv(scratch<6>(0)), U(scratch<7>(0)), x(scratch<8>(P_.m)),
        u(scratch<9>(P_.m)), w(scratch<10>(P_.m)) {
    std::copy(lam0, lam0 + m, z.begin());
    if (!admm) return;
    Minv.assign(m * m, 0.0);
    U.assign(m * m, 0.0);
    for (int i = 0; i < m; ++i) dbar += P.A[i * m + i];
    dbar /= m;
    rho = rho0 = rho_scale * dbar;
    inverse(P, rho, Minv, U);
    start(lam0);
  }

  // w = desaxce(v): [mu |u_t|, 0, 0] per contact, u = A v + c
  void desaxce(const double* v) {
    P.velocity(v, u.data());
    for (int k = 0; k < P.K; ++k) {
      const double a = u[3 * k + 1], b = u[3 * k + 2];
      w[3 * k] = P.mu[k] * std::sqrt(a * a + b * b);
      w[3 * k + 1] = w[3 * k + 2] = 0.0;
    }
  }

  void start(const double* lam) {
    for (int i = 0; i < m; ++i) z[i] = lam[i];
    for (int k = 0; k < P.K; ++k) project_cone(&z[3 * k], P.mu[k]);
    desaxce(z.data());  // u = A z + c
    for (int i = 0; i < m; ++i) y[i] = -(u[i] + w[i]);
  }

  void restart(const double* lam) {
    if (admm) start(lam);
    else for (int i = 0; i < m; ++i) z[i] = lam[i];
  }

  void update() {
    if (!admm) {  // one Gauss-Seidel sweep
      for (int k = 0; k < P.K; ++k) {
        double uk[3];
        for (int r = 0; r < 3; ++r) {
          const double* row = P.A + (3 * k + r) * m;
          double s = P.c[3 * k + r];
          for (int j = 0; j < m; ++j) s += row[j] * z[j];
          uk[r] = s;
        }
        const double ln = jmax(0.0, z[3 * k] - P.rn[k] * uk[0]);
        const double v1 = z[3 * k + 1] - P.rt[k] * uk[1], v2 = z[3 * k + 2] - P.rt[k] * uk[2];
        const double rr = P.mu[k] * ln, n2 = v1 * v1 + v2 * v2;
        const double scale = n2 > rr * rr ? rr / std::sqrt(n2) : 1.0;
        z[3 * k] = ln;
        z[3 * k + 1] = v1 * scale;
        z[3 * k + 2] = v2 * scale;
      }
      return;
    }
    desaxce(z.data());
    for (int i = 0; i < m; ++i) w[i] = rho * z[i] - y[i] - P.c[i] - w[i];
    // Minv is symmetric to the bit (mirrored): its rows are its columns
    for (int i = 0; i < m; ++i) x[i] = 0.0;
    gemv_t(m, Minv.data(), w.data(), x.data());
    // u: the new z, projected
    for (int i = 0; i < m; ++i) u[i] = x[i] + y[i] / rho;
    for (int k = 0; k < P.K; ++k) project_cone(&u[3 * k], P.mu[k]);
    double rp = 0, rd = 0;
    for (int i = 0; i < m; ++i) {
      y[i] += rho * (x[i] - u[i]);
      rp = jmax(rp, std::fabs(x[i] - u[i]));
      rd = jmax(rd, std::fabs(u[i] - z[i]));
      z[i] = u[i];
    }
    r_p = dbar * rp;
    r_d = rho * rd;
  }

  void adapt() {
    if (!admm || !adaptive) return;
    const bool up = (r_p > kRhoBalance * r_d) && (rho < kRhoRange * rho0);
    const bool down = (r_d > kRhoBalance * r_p) && (rho > rho0 / kRhoRange);
    if (up || down) {
      rho = up ? rho * kRhoFactor : rho / kRhoFactor;
      inverse(P, rho, Minv, U);
    }
  }
};

// _solvers._newton: lam - (I - J)^-1 (lam - F(lam)), J = dF/dlam as jax.jacfwd takes it
void newton(const Problem& P, const double* lam, double* out) {
  const int m = P.m;
  std::vector<double>&F = scratch<11>(m), &u = scratch<12>(m), &M = scratch<13>(m * m),
                      &b = scratch<14>(m);
  P.fixed_point(lam, F.data(), u.data());
  // M = I - J, row by row (F's rows of contact k depend on lam through A's rows 3k..3k+2)
  for (int k = 0; k < P.K; ++k) {
    const double rn = P.rn[k], rt = P.rt[k], mu = P.mu[k];
    const double wn = lam[3 * k] - rn * u[3 * k];
    const double g = wn > 0 ? 1.0 : (wn == 0 ? 0.5 : 0.0);  // d max(0, w) / dw
    const double ln = jmax(0.0, wn);
    const double v1 = lam[3 * k + 1] - rt * u[3 * k + 1], v2 = lam[3 * k + 2] - rt * u[3 * k + 2];
    const double rho = mu * ln, n2 = v1 * v1 + v2 * v2;
    const bool out_ = n2 > rho * rho;
    const double norm = out_ ? std::sqrt(n2) : 1.0;
    const double* An = P.A + (3 * k) * m;
    const double* A1 = An + m;
    const double* A2 = A1 + m;
    for (int j = 0; j < m; ++j) {
      const double dw = (j == 3 * k ? 1.0 : 0.0) - rn * An[j];
      const double dln = g * dw;
      const double dv1 = (j == 3 * k + 1 ? 1.0 : 0.0) - rt * A1[j];
      const double dv2 = (j == 3 * k + 2 ? 1.0 : 0.0) - rt * A2[j];
      double d1 = dv1, d2 = dv2;
      if (out_) {
        const double scale = rho / norm;
        const double dnorm = (v1 * dv1 + v2 * dv2) / norm;
        const double dscale = mu * dln / norm - rho * dnorm / (norm * norm);
        d1 = scale * dv1 + v1 * dscale;
        d2 = scale * dv2 + v2 * dscale;
      }
      M[(3 * k) * m + j] = (j == 3 * k ? 1.0 : 0.0) - dln;
      M[(3 * k + 1) * m + j] = (j == 3 * k + 1 ? 1.0 : 0.0) - d1;
      M[(3 * k + 2) * m + j] = (j == 3 * k + 2 ? 1.0 : 0.0) - d2;
    }
  }
  for (int i = 0; i < m; ++i) b[i] = lam[i] - F[i];
  std::vector<double>& dx = scratch<15>(m);
  lu_solve(m, M.data(), b.data(), dx.data());
  for (int i = 0; i < m; ++i) out[i] = lam[i] - dx[i];
}

struct Params {
  bool admm, adaptive, polish;
  int iterations;
  double rho_scale, tolerance;
};

// One problem: the impulses of lowest residual into lam, their residual and the
// iterations run (`_solvers._run`).
void solve_one(int m, const double* A, const double* c, const double* mu, const double* lam0,
               const Params& prm, double* lam, double* res_out, int32_t* its_out) {
  const Problem P(m, A, c, mu);
  Solver S(P, prm.admm, prm.adaptive, prm.rho_scale, lam0);
  std::vector<double>&F = scratch<16>(m), &u = scratch<17>(m), &best = scratch<18>(m),
                      &lam_n = scratch<19>(m);
  const int its = prm.iterations;
  const double tolerance = prm.tolerance;
  int k = 0;
  auto run_block = [&]() {
    const int n = std::min(kCheckEvery, its - k);
    for (int i = 0; i < n; ++i) S.update();
    k += n;
  };
  run_block();
  best = S.z;
  double res = P.residual(best.data(), F.data(), u.data());
  while (k < its && (res > tolerance || tolerance <= 0)) {
    if (prm.polish) {
      newton(P, S.z.data(), lam_n.data());
      const double res_n = P.residual(lam_n.data(), F.data(), u.data());
      const bool better = res_n < res;
      if (better) best = lam_n;
      res = jmin(res_n, res);
      if (better) S.restart(lam_n.data());
    }
    S.adapt();
    run_block();
    const double res_b = P.residual(S.z.data(), F.data(), u.data());
    if (res_b < res) best = S.z;
    res = jmin(res_b, res);
  }
  if (prm.polish && tolerance > 0) {
    // _solvers._newton_chain: full Newton steps, each from the last, from the best
    // iterate; a non-finite residual ends the chain
    std::vector<double>&cur = scratch<20>(0), &old_best = scratch<21>(0);
    cur = best;
    int j = 0;
    while (res > tolerance && j < kNewtonSteps) {
      newton(P, cur.data(), lam_n.data());
      const double r = P.residual(lam_n.data(), F.data(), u.data());
      const bool ok = std::isfinite(r);
      const bool better = ok && r < res;
      old_best = best;
      if (better) best = lam_n, res = r;
      cur = ok ? lam_n : old_best;
      j = ok ? j + 1 : kNewtonSteps;
      ++k;
    }
  }
  for (int i = 0; i < m; ++i) lam[i] = best[i];
  *res_out = res;
  *its_out = k;
}

Params params(int64_t solver, int64_t iterations, double rho_scale, double tolerance,
              int64_t adaptive, int64_t polish) {
  return Params{solver == 1, adaptive != 0, polish != 0, static_cast<int>(iterations),
                rho_scale, tolerance};
}

ffi::Error Solve(ffi::Buffer<ffi::F64> A_b, ffi::Buffer<ffi::F64> c_b, ffi::Buffer<ffi::F64> mu_b,
                 ffi::Buffer<ffi::F64> lam0_b, ffi::ResultBuffer<ffi::F64> lam_b,
                 ffi::ResultBuffer<ffi::F64> res_b, ffi::ResultBuffer<ffi::S32> its_b,
                 int64_t solver, int64_t iterations, double rho_scale, double tolerance,
                 int64_t adaptive, int64_t polish) {
  const int m = static_cast<int>(c_b.element_count());
  if (m % 3 || static_cast<int>(A_b.element_count()) != m * m)
    return ffi::Error::InvalidArgument("jaxrbd_contact_solve: A must be (3K, 3K), c (3K,)");
  solve_one(m, A_b.typed_data(), c_b.typed_data(), mu_b.typed_data(), lam0_b.typed_data(),
            params(solver, iterations, rho_scale, tolerance, adaptive, polish),
            lam_b->typed_data(), res_b->typed_data(), its_b->typed_data());
  return ffi::Error::Success();
}

// The stride between problems of an operand of a batch of B problems of `size` numbers
// each: `size` where it holds all B, 0 where it holds one (an operand the batch shares,
// read in place rather than copied B times); -1 otherwise.
int64_t stride(size_t count, int64_t size, int64_t B) {
  if (static_cast<int64_t>(count) == size * B) return size;
  if (static_cast<int64_t>(count) == size) return 0;
  return -1;
}

// B problems of m rows, one after the other, each solved as `Solve` solves one (the
// `jax.vmap` rule of `ffi_contact.solve`): the same iterates, checks and stopping rule
// per problem, so the answers are those of the single-problem kernel. B comes from the
// residuals' shape (B,).
ffi::Error SolveBatch(ffi::Buffer<ffi::F64> A_b, ffi::Buffer<ffi::F64> c_b,
                      ffi::Buffer<ffi::F64> mu_b, ffi::Buffer<ffi::F64> lam0_b,
                      ffi::ResultBuffer<ffi::F64> lam_b, ffi::ResultBuffer<ffi::F64> res_b,
                      ffi::ResultBuffer<ffi::S32> its_b, int64_t m, int64_t solver,
                      int64_t iterations, double rho_scale, double tolerance, int64_t adaptive,
                      int64_t polish) {
  const int64_t B = static_cast<int64_t>(res_b->element_count());
  const int64_t sA = stride(A_b.element_count(), m * m, B);
  const int64_t sc = stride(c_b.element_count(), m, B);
  const int64_t smu = stride(mu_b.element_count(), m / 3, B);
  const int64_t sl = stride(lam0_b.element_count(), m, B);
  if (m % 3 || sA < 0 || sc < 0 || smu < 0 || sl < 0 ||
      static_cast<int64_t>(lam_b->element_count()) != B * m)
    return ffi::Error::InvalidArgument(
        "jaxrbd_contact_solve_batch: A (B, 3K, 3K), c (B, 3K), mu (B, K), lam0 (B, 3K), each "
        "of one problem or B");
  const Params prm = params(solver, iterations, rho_scale, tolerance, adaptive, polish);
  const double *A = A_b.typed_data(), *c = c_b.typed_data(), *mu = mu_b.typed_data(),
               *l0 = lam0_b.typed_data();
  double *lam = lam_b->typed_data(), *res = res_b->typed_data();
  int32_t* its = its_b->typed_data();
  for (int64_t b = 0; b < B; ++b)
    solve_one(static_cast<int>(m), A + b * sA, c + b * sc, mu + b * smu, l0 + b * sl, prm,
              lam + b * m, res + b, its + b);
  return ffi::Error::Success();
}

}  // namespace

// One problem's buffers (A, c, mu, lam0 -> lam, residual, iterations), and the solver's
// settings, shared by the one-problem and the batched handler.
#define BIND_PROBLEM(b)                                                                   \
  b.Arg<ffi::Buffer<ffi::F64>>()       /* A */                                            \
      .Arg<ffi::Buffer<ffi::F64>>()    /* c */                                            \
      .Arg<ffi::Buffer<ffi::F64>>()    /* mu */                                           \
      .Arg<ffi::Buffer<ffi::F64>>()    /* lam0 */                                         \
      .Ret<ffi::Buffer<ffi::F64>>()    /* lam */                                          \
      .Ret<ffi::Buffer<ffi::F64>>()    /* residual */                                     \
      .Ret<ffi::Buffer<ffi::S32>>()    /* iterations */
#define BIND_SOLVER(b)                                                                    \
  b.Attr<int64_t>("solver")                                                               \
      .Attr<int64_t>("iterations")                                                        \
      .Attr<double>("rho_scale")                                                          \
      .Attr<double>("tolerance")                                                          \
      .Attr<int64_t>("adaptive")                                                          \
      .Attr<int64_t>("polish")

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdContactSolve, Solve,
                              BIND_SOLVER(BIND_PROBLEM(ffi::Ffi::Bind())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdContactSolveBatch, SolveBatch,
                              BIND_SOLVER(BIND_PROBLEM(ffi::Ffi::Bind()).Attr<int64_t>("m")));
