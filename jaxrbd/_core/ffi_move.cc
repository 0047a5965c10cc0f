// jaxrbd's native configuration move: ``q (+) v dt`` on the joint manifolds, and its
// vector-Jacobian product, each as one XLA FFI call (`jaxrbd._core.ffi_move`).
//
// The formulas are those of jaxrbd/_configuration.py's `integrate_batched` and
// jaxrbd/_core/rotation.py's component form, operation for operation: plain
// coordinates ``q + v dt``; a spherical joint's quaternion ``normalize(quat exp(w))``;
// a free joint's ``R+ = R exp(w)``, ``p+ = p + R(quat/|quat|) V(w) v_lin`` with ``w``
// and ``v_lin`` scaled by dt, the exponential's coefficients from one sine and one
// cosine of ``t/2`` and Taylor series below ``t^2 < 1e-12``.
//
// The vector-Jacobian product differentiates the same code in forward mode: each joint's
// move runs once on dual numbers with one derivative slot per input of that joint (at
// most 11: a free joint's quaternion, 6 velocities and dt), and the cotangent is
// contracted with the resulting Jacobian. Only the branch taken is evaluated, so the
// derivatives at rest are those of the Taylor series, finite.
//
// Every handler takes a batch: operands of shape (..., nq), (..., nv) and (...) for dt,
// B states in all (B from the output's size), as `jax.ffi.ffi_call`'s "broadcast_all"
// passes them under `jax.vmap`.
#include <cmath>
#include <cstdint>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// A number and its derivatives along N directions (forward mode).
template <int N>
struct Dual {
  double v;
  double d[N];
  Dual() : v(0.0) {
    for (int i = 0; i < N; ++i) d[i] = 0.0;
  }
  Dual(double x) : v(x) {  // NOLINT: constants mix with duals
    for (int i = 0; i < N; ++i) d[i] = 0.0;
  }
};

template <int N>
Dual<N> operator+(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r;
  r.v = a.v + b.v;
  for (int i = 0; i < N; ++i) r.d[i] = a.d[i] + b.d[i];
  return r;
}
template <int N>
Dual<N> operator-(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r;
  r.v = a.v - b.v;
  for (int i = 0; i < N; ++i) r.d[i] = a.d[i] - b.d[i];
  return r;
}
template <int N>
Dual<N> operator*(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r;
  r.v = a.v * b.v;
  for (int i = 0; i < N; ++i) r.d[i] = a.d[i] * b.v + a.v * b.d[i];
  return r;
}
template <int N>
Dual<N> operator/(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r;
  r.v = a.v / b.v;
  const double inv = 1.0 / b.v;
  for (int i = 0; i < N; ++i) r.d[i] = (a.d[i] - r.v * b.d[i]) * inv;
  return r;
}
template <int N>
Dual<N> operator+(double a, const Dual<N>& b) { return Dual<N>(a) + b; }
template <int N>
Dual<N> operator-(double a, const Dual<N>& b) { return Dual<N>(a) - b; }
template <int N>
Dual<N> operator*(double a, const Dual<N>& b) {
  Dual<N> r;
  r.v = a * b.v;
  for (int i = 0; i < N; ++i) r.d[i] = a * b.d[i];
  return r;
}
template <int N>
Dual<N> operator/(double a, const Dual<N>& b) { return Dual<N>(a) / b; }
template <int N>
Dual<N> operator/(const Dual<N>& a, double b) { return a / Dual<N>(b); }
// f(a) for a function of one variable with value fa = f(a.v) and derivative dfa there.
template <int N>
Dual<N> chain(const Dual<N>& a, double fa, double dfa) {
  Dual<N> r;
  r.v = fa;
  for (int i = 0; i < N; ++i) r.d[i] = a.d[i] * dfa;
  return r;
}
template <int N>
Dual<N> sqrt(const Dual<N>& a) {
  const double s = std::sqrt(a.v);
  return chain(a, s, 0.5 / s);
}
template <int N>
Dual<N> sin(const Dual<N>& a) { return chain(a, std::sin(a.v), std::cos(a.v)); }
template <int N>
Dual<N> cos(const Dual<N>& a) { return chain(a, std::cos(a.v), -std::sin(a.v)); }

inline double value(double x) { return x; }
template <int N>
double value(const Dual<N>& x) { return x.v; }

using std::cos;
using std::sin;
using std::sqrt;

template <class T>
void cross(const T* a, const T* b, T* r) {
  r[0] = a[1] * b[2] - a[2] * b[1];
  r[1] = a[2] * b[0] - a[0] * b[2];
  r[2] = a[0] * b[1] - a[1] * b[0];
}

// so3_exp_c: exp(w) as a quaternion, and the left Jacobian's (a, b).
template <class T>
void so3_exp(const T* w, T* quat, T* a, T* b) {
  const T t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
  T half_sin;
  if (value(t2) < 1e-12) {
    half_sin = 0.5 - t2 / 48.0;
    quat[0] = 1.0 - t2 / 8.0;
    *b = 1.0 / 6.0 - t2 / 120.0;
  } else {
    const T t = sqrt(t2);
    const T s = sin(0.5 * t), c = cos(0.5 * t);
    half_sin = s / t;
    quat[0] = c;
    *b = (t - 2.0 * s * c) / (t * t * t);
  }
  for (int i = 0; i < 3; ++i) quat[1 + i] = half_sin * w[i];
  *a = 2.0 * half_sin * half_sin;
}

// normalize_quat_c(quat_mul_c(q, r)): a zero product gives NaN.
template <class T>
void mul_normalize(const T* a, const T* b, T* out) {
  T m[4];
  m[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3];
  m[1] = a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2];
  m[2] = a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1];
  m[3] = a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0];
  const T n2 = m[0] * m[0] + m[1] * m[1] + m[2] * m[2] + m[3] * m[3];
  if (value(n2) > 0) {
    const T inv = 1.0 / sqrt(n2);
    for (int i = 0; i < 4; ++i) out[i] = m[i] * inv;
  } else {
    for (int i = 0; i < 4; ++i) out[i] = T(NAN);
  }
}

// A spherical joint: quat (4), w (3, a velocity), dt -> quat+ (4).
template <class T>
void spherical(const T* quat, const T* v, const T& dt, T* out) {
  T w[3], rot[4], a, b;
  for (int i = 0; i < 3; ++i) w[i] = dt * v[i];
  so3_exp(w, rot, &a, &b);
  mul_normalize(quat, rot, out);
}

// A free joint: q (p 3, quat 4), v (w 3, v_lin 3), dt -> q+ (7).
template <class T>
void free_joint(const T* q, const T* v, const T& dt, T* out) {
  T w[3], lv[3], rot[4], a, b;
  for (int i = 0; i < 3; ++i) {
    w[i] = dt * v[i];
    lv[i] = dt * v[3 + i];
  }
  const T* quat = q + 3;
  so3_exp(w, rot, &a, &b);
  // V(w) lv = lv + a (w x lv) + b w x (w x lv)
  T wx[3], wwx[3], x[3];
  cross(w, lv, wx);
  cross(w, wx, wwx);
  for (int i = 0; i < 3; ++i) x[i] = lv[i] + a * wx[i] + b * wwx[i];
  // R(quat / |quat|) x = x + 2 (w (u x x) + u x (u x x)) / |quat|^2, u = quat's vector
  const T n2 = quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3];
  T vx[3], vvx[3];
  cross(quat + 1, x, vx);
  cross(quat + 1, vx, vvx);
  const T two = 2.0 / n2;
  for (int i = 0; i < 3; ++i) out[i] = q[i] + (x[i] + two * (quat[0] * vx[i] + vvx[i]));
  mul_normalize(quat, rot, out + 3);
}

// The joints' table: four numbers a block (kind, q start, v start, length), kind 0 a run
// of plain coordinates of that length, 1 a spherical joint, 2 a free joint.
struct Block {
  int64_t kind, qs, vs, n;
};

inline Block block(ffi::Span<const int64_t> t, size_t j) {
  return {t[4 * j], t[4 * j + 1], t[4 * j + 2], t[4 * j + 3]};
}

void move_one(ffi::Span<const int64_t> t, const double* q, const double* v, double dt,
              double* out) {
  for (size_t j = 0; j < t.size() / 4; ++j) {
    const Block bl = block(t, j);
    if (bl.kind == 0) {
      for (int64_t i = 0; i < bl.n; ++i) out[bl.qs + i] = q[bl.qs + i] + v[bl.vs + i] * dt;
    } else if (bl.kind == 1) {
      spherical(q + bl.qs, v + bl.vs, dt, out + bl.qs);
    } else {
      free_joint(q + bl.qs, v + bl.vs, dt, out + bl.qs);
    }
  }
}

// One joint's vector-Jacobian product by forward mode: the joint's nq coordinates after
// the first P, its nv velocities and dt as N = nq - P + nv + 1 seeded duals, and the
// cotangent ct (nq) of the joint's move contracted with each direction. The first P
// coordinates (a free joint's origin) enter the move as ``p + step``, ``step``
// independent of them: their cotangent is ct's, and they take no direction.
template <int NQ, int NV, int P, class Move>
void joint_vjp(Move f, const double* q, const double* v, double dt, const double* ct,
               double* qb, double* vb, double* dtb) {
  constexpr int N = NQ - P + NV + 1;
  Dual<N> qd[NQ], vd[NV], dtd(dt), out[NQ];
  for (int i = 0; i < NQ; ++i) {
    qd[i] = Dual<N>(q[i]);
    if (i >= P) qd[i].d[i - P] = 1.0;
  }
  for (int i = 0; i < NV; ++i) {
    vd[i] = Dual<N>(v[i]);
    vd[i].d[NQ - P + i] = 1.0;
  }
  dtd.d[N - 1] = 1.0;
  f(qd, vd, dtd, out);
  double g[N] = {};
  for (int o = 0; o < NQ; ++o)
    for (int k = 0; k < N; ++k) g[k] += ct[o] * out[o].d[k];
  for (int i = 0; i < P; ++i) qb[i] = ct[i];
  for (int i = P; i < NQ; ++i) qb[i] = g[i - P];
  for (int i = 0; i < NV; ++i) vb[i] = g[NQ - P + i];
  *dtb += g[N - 1];
}

void vjp_one(ffi::Span<const int64_t> t, const double* q, const double* v, double dt,
             const double* ct, double* qb, double* vb, double* dtb) {
  *dtb = 0.0;
  for (size_t j = 0; j < t.size() / 4; ++j) {
    const Block bl = block(t, j);
    if (bl.kind == 0) {
      for (int64_t i = 0; i < bl.n; ++i) {
        qb[bl.qs + i] = ct[bl.qs + i];
        vb[bl.vs + i] = ct[bl.qs + i] * dt;
        *dtb += ct[bl.qs + i] * v[bl.vs + i];
      }
    } else if (bl.kind == 1) {
      joint_vjp<4, 3, 0>([](auto* q_, auto* v_, auto& dt_, auto* o_) { spherical(q_, v_, dt_, o_); },
                      q + bl.qs, v + bl.vs, dt, ct + bl.qs, qb + bl.qs, vb + bl.vs, dtb);
    } else {
      joint_vjp<7, 6, 3>([](auto* q_, auto* v_, auto& dt_, auto* o_) { free_joint(q_, v_, dt_, o_); },
                      q + bl.qs, v + bl.vs, dt, ct + bl.qs, qb + bl.qs, vb + bl.vs, dtb);
    }
  }
}

ffi::Error check(size_t q, size_t v, size_t dt, int64_t nq, int64_t nv, int64_t B) {
  if (nq <= 0 || static_cast<int64_t>(q) != B * nq || static_cast<int64_t>(v) != B * nv ||
      static_cast<int64_t>(dt) != B)
    return ffi::Error::InvalidArgument(
        "jaxrbd_move: q (..., nq), v (..., nv) and dt (...) of one batch shape");
  return ffi::Error::Success();
}

ffi::Error Move(ffi::Buffer<ffi::F64> q, ffi::Buffer<ffi::F64> v, ffi::Buffer<ffi::F64> dt,
                ffi::ResultBuffer<ffi::F64> out, ffi::Span<const int64_t> table, int64_t nq,
                int64_t nv) {
  const int64_t B = nq > 0 ? static_cast<int64_t>(out->element_count()) / nq : 0;
  ffi::Error e = check(q.element_count(), v.element_count(), dt.element_count(), nq, nv, B);
  if (e.failure()) return e;
  for (int64_t b = 0; b < B; ++b)
    move_one(table, q.typed_data() + b * nq, v.typed_data() + b * nv, dt.typed_data()[b],
             out->typed_data() + b * nq);
  return ffi::Error::Success();
}

ffi::Error MoveVjp(ffi::Buffer<ffi::F64> q, ffi::Buffer<ffi::F64> v, ffi::Buffer<ffi::F64> dt,
                   ffi::Buffer<ffi::F64> ct, ffi::ResultBuffer<ffi::F64> qb,
                   ffi::ResultBuffer<ffi::F64> vb, ffi::ResultBuffer<ffi::F64> dtb,
                   ffi::Span<const int64_t> table, int64_t nq, int64_t nv) {
  const int64_t B = static_cast<int64_t>(dtb->element_count());
  ffi::Error e = check(q.element_count(), v.element_count(), dt.element_count(), nq, nv, B);
  if (e.failure() || static_cast<int64_t>(ct.element_count()) != B * nq) {
    return e.failure() ? e
                       : ffi::Error::InvalidArgument("jaxrbd_move_vjp: the cotangent is (..., nq)");
  }
  for (int64_t b = 0; b < B; ++b)
    vjp_one(table, q.typed_data() + b * nq, v.typed_data() + b * nv, dt.typed_data()[b],
            ct.typed_data() + b * nq, qb->typed_data() + b * nq, vb->typed_data() + b * nv,
            dtb->typed_data() + b);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdMove, Move,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // v
                                  .Arg<ffi::Buffer<ffi::F64>>()  // dt
                                  .Ret<ffi::Buffer<ffi::F64>>()  // q+
                                  .Attr<ffi::Span<const int64_t>>("table")
                                  .Attr<int64_t>("nq")
                                  .Attr<int64_t>("nv"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdMoveVjp, MoveVjp,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // v
                                  .Arg<ffi::Buffer<ffi::F64>>()  // dt
                                  .Arg<ffi::Buffer<ffi::F64>>()  // cotangent of q+
                                  .Ret<ffi::Buffer<ffi::F64>>()  // q's
                                  .Ret<ffi::Buffer<ffi::F64>>()  // v's
                                  .Ret<ffi::Buffer<ffi::F64>>()  // dt's
                                  .Attr<ffi::Span<const int64_t>>("table")
                                  .Attr<int64_t>("nq")
                                  .Attr<int64_t>("nv"));
