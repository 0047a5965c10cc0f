// jaxrbd's native CPU kernels: one state's recursion as a single XLA FFI call.
//
// The model arrives as jaxrbd's one-DoF nodes (RBDL's emulation of multi-DoF joints): node
// k >= 1 has parent node parent[k] (0 is the world), a joint kind kind[k], the index
// qi[k] of its first coordinate, the node bias_to[k] whose joint velocity it adds to, the
// body first_body[k] whose tree placement X(E, r) it carries (-1: none, X = 1) and a
// motion-subspace column S = [w; v]. Body b's rigid-body inertia [m, m c, Ixx, Ixy, Iyy,
// Ixz, Iyz, Izz] about its origin goes to node body_node[b], moved by the body's own
// placement X(E_b, r_b) when a fixed joint welds it there (fixed[b]). Spatial vectors are
// [angular; linear] (Featherstone 2008). These kernels mirror jaxrbd._core.jcalc and the
// algorithms' XLA programs; the tests hold them to those.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// The small spatial-algebra helpers of the recursions' inner loops: inlined, so that the
// compiler schedules each node's work as one block.
#define HOT [[gnu::always_inline]] inline

// A per-thread buffer of n copies of x, reused from call to call: a call allocates
// nothing once its thread has run one of the same size (XLA may run kernels on several
// threads at once; each has its own buffers).
template <int Slot, class T>
std::vector<T>& scratch(size_t n, const T& x) {
  thread_local std::vector<T> buffer;
  buffer.assign(n, x);
  return buffer;
}

// The same without the fill, for buffers a kernel writes before it reads them: n elements
// of whatever the thread's last call left there.
template <int Slot, class T>
std::vector<T>& scratch_unset(size_t n) {
  thread_local std::vector<T> buffer;
  buffer.resize(n);
  return buffer;
}

// Joint kinds of a node (jaxrbd._core.ffi.NODE_KINDS).
enum Kind : int32_t { kWorld = 0, kScrew = 1, kFree = 2, kSpherical = 3, kInner = 4, kTranslation = 5 };

struct Mat6 {
  double m[6][6];
};

// The Pluecker transform X(E, r) = [E 0; -E r^ E], kept as its rotation and translation.
struct Xf {
  double E[3][3];
  double r[3];
  bool identity;  // an inner node of a multi-DoF joint: X = 1
};

// X m = [E w; E (v - r x w)] for a motion vector m = [w; v].
HOT void apply(const Xf& X, const double* m, double* o) {
  if (X.identity) {
    for (int i = 0; i < 6; ++i) o[i] = m[i];
    return;
  }
  const double* r = X.r;
  const double t[3] = {m[3] - (r[1] * m[2] - r[2] * m[1]), m[4] - (r[2] * m[0] - r[0] * m[2]),
                       m[5] - (r[0] * m[1] - r[1] * m[0])};
  for (int i = 0; i < 3; ++i) {
    o[i] = X.E[i][0] * m[0] + X.E[i][1] * m[1] + X.E[i][2] * m[2];
    o[i + 3] = X.E[i][0] * t[0] + X.E[i][1] * t[1] + X.E[i][2] * t[2];
  }
}

// X^T f = [E^T n + r x E^T l; E^T l] for a force f = [n; l].
HOT void apply_T(const Xf& X, const double* f, double* o) {
  if (X.identity) {
    for (int i = 0; i < 6; ++i) o[i] = f[i];
    return;
  }
  double n[3], l[3];
  for (int i = 0; i < 3; ++i) {
    n[i] = X.E[0][i] * f[0] + X.E[1][i] * f[1] + X.E[2][i] * f[2];
    l[i] = X.E[0][i] * f[3] + X.E[1][i] * f[4] + X.E[2][i] * f[5];
  }
  const double* r = X.r;
  o[0] = n[0] + r[1] * l[2] - r[2] * l[1];
  o[1] = n[1] + r[2] * l[0] - r[0] * l[2];
  o[2] = n[2] + r[0] * l[1] - r[1] * l[0];
  o[3] = l[0]; o[4] = l[1]; o[5] = l[2];
}

// Out += X^T [A B; B^T C] X for a symmetric 6x6 matrix (an inertia): rotate the blocks
// (E^T . E), then shift by r: A - B R + R B^T - R C R, B + R C, C (R = r^).
void add_congruence(const Xf& X, const Mat6& M, Mat6& Out) {
  if (X.identity) {
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) Out.m[i][j] += M.m[i][j];
    return;
  }
  double A[3][3], B[3][3], C[3][3], T[3][3];
  const double(*E)[3] = X.E;
  auto rotate = [&](int i0, int j0, double O[3][3]) {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        T[i][j] = M.m[i0 + i][j0] * E[0][j] + M.m[i0 + i][j0 + 1] * E[1][j] +
                  M.m[i0 + i][j0 + 2] * E[2][j];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) O[i][j] = E[0][i] * T[0][j] + E[1][i] * T[1][j] + E[2][i] * T[2][j];
  };
  rotate(0, 0, A);
  rotate(0, 3, B);
  rotate(3, 3, C);
  const double* r = X.r;
  // R Y for R = r^: row i of R is the cross product with r
  auto cross_left = [&](const double Y[3][3], double O[3][3]) {
    for (int j = 0; j < 3; ++j) {
      O[0][j] = r[1] * Y[2][j] - r[2] * Y[1][j];
      O[1][j] = r[2] * Y[0][j] - r[0] * Y[2][j];
      O[2][j] = r[0] * Y[1][j] - r[1] * Y[0][j];
    }
  };
  double RC[3][3], RB[3][3], RCR[3][3];
  cross_left(C, RC);   // R C
  double Bt[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) Bt[i][j] = B[j][i];
  cross_left(Bt, RB);  // R B^T; B R = -(R B^T)^T
  // R C R = -(R (R C)^T)^T, and R C R is symmetric: R (R C)^T
  double RCt[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) RCt[i][j] = RC[j][i];
  cross_left(RCt, RCR);  // R (R C)^T = R C^T R^T = -R C R
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      Out.m[i][j] += A[i][j] + RB[j][i] + RB[i][j] + RCR[i][j];
      Out.m[i][j + 3] += B[i][j] + RC[i][j];
      Out.m[i + 3][j] += B[j][i] + RC[j][i];
      Out.m[i + 3][j + 3] += C[i][j];
    }
}

HOT void skew(const double* a, double o[3][3]) {
  o[0][0] = 0; o[0][1] = -a[2]; o[0][2] = a[1];
  o[1][0] = a[2]; o[1][1] = 0; o[1][2] = -a[0];
  o[2][0] = -a[1]; o[2][1] = a[0]; o[2][2] = 0;
}

// Rotation (child -> parent) of the unit quaternion along q/|q|, (w, x, y, z); NaN for 0.
HOT void quat_R(const double* q, double R[3][3]) {
  const double n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  const double n = n2 > 0 ? std::sqrt(n2) : NAN;
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  R[0][0] = 1 - 2 * (y * y + z * z); R[0][1] = 2 * (x * y - w * z); R[0][2] = 2 * (x * z + w * y);
  R[1][0] = 2 * (x * y + w * z); R[1][1] = 1 - 2 * (x * x + z * z); R[1][2] = 2 * (y * z - w * x);
  R[2][0] = 2 * (x * z - w * y); R[2][1] = 2 * (y * z + w * x); R[2][2] = 1 - 2 * (x * x + y * y);
}

// The joint transform X_J = X(E_J, r_J) of node k (E_J = R^T: parent -> child).
HOT void joint_transform(int32_t kind, const double* S, const double* q, double E[3][3],
                     double r[3]) {
  double R[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  r[0] = r[1] = r[2] = 0;
  if (kind == kScrew) {
    // the screw exp(q [w; v]) (jcalc._screw): Rodrigues for R, its origin displacement
    const double* w = S;
    const double* v = S + 3;
    double wx[3][3];
    skew(w, wx);
    const double s = std::sin(q[0]), c = std::cos(q[0]);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        double wx2 = 0;
        for (int l = 0; l < 3; ++l) wx2 += wx[i][l] * wx[l][j];
        R[i][j] = (i == j) + s * wx[i][j] + (1 - c) * wx2;
      }
    const double wv[3] = {w[1] * v[2] - w[2] * v[1], w[2] * v[0] - w[0] * v[2],
                          w[0] * v[1] - w[1] * v[0]};
    const double wdv = w[0] * v[0] + w[1] * v[1] + w[2] * v[2];
    const double ww = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
    for (int i = 0; i < 3; ++i)
      r[i] = wv[i] - (R[i][0] * wv[0] + R[i][1] * wv[1] + R[i][2] * wv[2]) +
             (w[i] * wdv + (1 - ww) * v[i]) * q[0];
  } else if (kind == kFree) {
    quat_R(q + 3, R);
    r[0] = q[0]; r[1] = q[1]; r[2] = q[2];
  } else if (kind == kSpherical) {
    quat_R(q, R);
  } else if (kind == kTranslation) {
    r[0] = q[0]; r[1] = q[1]; r[2] = q[2];
  }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) E[i][j] = R[j][i];
}

HOT double dot6(const double* a, const double* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5];
}

HOT void mv(const Mat6& A, const double* x, double* y) {
  for (int i = 0; i < 6; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += A.m[i][j] * x[j];
    y[i] = s;
  }
}

HOT void cross_motion(const double* v, const double* m, double* o) {
  o[0] = v[1] * m[2] - v[2] * m[1];
  o[1] = v[2] * m[0] - v[0] * m[2];
  o[2] = v[0] * m[1] - v[1] * m[0];
  o[3] = v[1] * m[5] - v[2] * m[4] + v[4] * m[2] - v[5] * m[1];
  o[4] = v[2] * m[3] - v[0] * m[5] + v[5] * m[0] - v[3] * m[2];
  o[5] = v[0] * m[4] - v[1] * m[3] + v[3] * m[1] - v[4] * m[0];
}

HOT void cross_force(const double* v, const double* f, double* o) {
  o[0] = v[1] * f[2] - v[2] * f[1] + v[4] * f[5] - v[5] * f[4];
  o[1] = v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5];
  o[2] = v[0] * f[1] - v[1] * f[0] + v[3] * f[4] - v[4] * f[3];
  o[3] = v[1] * f[5] - v[2] * f[4];
  o[4] = v[2] * f[3] - v[0] * f[5];
  o[5] = v[0] * f[4] - v[1] * f[3];
}

// y = I x for the rigid-body inertia of a compact row c = [m, h, Ixx, Ixy, Iyy, Ixz, Iyz,
// Izz] and a motion x = [w; v]: [I_o w + h x v; m v - h x w], a third of a 6x6 product.
HOT void inertia_times(const double* c, const double* x, double* y) {
  const double* w = x;
  const double* v = x + 3;
  y[0] = c[4] * w[0] + c[5] * w[1] + c[7] * w[2] + c[2] * v[2] - c[3] * v[1];
  y[1] = c[5] * w[0] + c[6] * w[1] + c[8] * w[2] + c[3] * v[0] - c[1] * v[2];
  y[2] = c[7] * w[0] + c[8] * w[1] + c[9] * w[2] + c[1] * v[1] - c[2] * v[0];
  y[3] = c[0] * v[0] - (c[2] * w[2] - c[3] * w[1]);
  y[4] = c[0] * v[1] - (c[3] * w[0] - c[1] * w[2]);
  y[5] = c[0] * v[2] - (c[1] * w[1] - c[2] * w[0]);
}

// The 6x6 rigid-body inertia [[I_o, h^], [-h^, m 1]] of a compact row (h = m c).
void inertia6(const double* I, Mat6& A) {
  double hx[3][3];
  skew(I + 1, hx);
  const double Io[3][3] = {{I[4], I[5], I[7]}, {I[5], I[6], I[8]}, {I[7], I[8], I[9]}};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      A.m[i][j] = Io[i][j];
      A.m[i][j + 3] = hx[i][j];
      A.m[i + 3][j] = -hx[i][j];
      A.m[i + 3][j + 3] = (i == j) * I[0];
    }
}

// The model's buffers, and the node inertias they give (fixed bodies merged).
struct Tree {
  int nn, nb;
  const int32_t *kind, *parent, *qi, *bias_to, *first_body, *body_node, *fixed;
  const double *E, *r, *inertia, *axes, *arm, *g;
  const double* Ik;  // the same as compact rows [m, h, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
  const Mat6* I0;  // the rigid node inertias (per-thread scratch, make_tree)
  Mat6* I;         // their working copy, which ABA and CRBA overwrite (reset_inertias)
};

// Restore t.I to the rigid node inertias before the next state of a batch.
void reset_inertias(const Tree& t) {
  for (int k = 0; k < t.nn; ++k) t.I[k] = t.I0[k];
}

// The states of a call: q is (nq,) for one state, or (B, nq) for a batch of B states of
// one model (the other per-state buffers have the same leading axis).
int64_t batch_of(const ffi::Buffer<ffi::F64>& q) {
  const auto d = q.dimensions();
  return d.size() == 2 ? d[0] : 1;
}

// Each node's rigid-body inertia in compact form (m, h = m c, I about the origin), summed
// over its bodies, a welded body's moved into the node's frame first; acc (nn x 10) is
// zero on entry.
const double* node_inertias(const Tree& t, double* acc) {
  const int nb = t.nb;
  const int32_t* bn = t.body_node;
  const int32_t* fx = t.fixed;
  for (int b = 1; b < nb; ++b) {
    if (bn[b] == 0) continue;  // welded to the world: never moves
    const double* I = t.inertia + 10 * b;
    const double m = I[0];
    double h[3] = {I[1], I[2], I[3]};
    double Io[3][3] = {{I[4], I[5], I[7]}, {I[5], I[6], I[8]}, {I[7], I[8], I[9]}};
    if (fx[b]) {
      // X(E, r) places the body in its node: rotate by E^T, then move the reference
      // point from the body's origin p = r to the node's (parallel axes, with h):
      // I_0 = I_p + (m |p|^2 + 2 p.h) 1 - m p p^T - h p^T - p h^T, h_0 = h + m p
      const double* E = t.E + 9 * b;
      const double* p = t.r + 3 * b;
      double hp[3], T[3][3], Ip[3][3];
      for (int i = 0; i < 3; ++i) hp[i] = E[i] * h[0] + E[3 + i] * h[1] + E[6 + i] * h[2];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          T[i][j] = Io[i][0] * E[j] + Io[i][1] * E[3 + j] + Io[i][2] * E[6 + j];
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
          Ip[i][j] = E[i] * T[0][j] + E[3 + i] * T[1][j] + E[6 + i] * T[2][j];
      const double pp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
      const double ph = p[0] * hp[0] + p[1] * hp[1] + p[2] * hp[2];
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j)
          Io[i][j] = Ip[i][j] + (i == j) * (m * pp + 2 * ph) - m * p[i] * p[j] -
                     hp[i] * p[j] - p[i] * hp[j];
      }
      for (int i = 0; i < 3; ++i) h[i] = hp[i] + m * p[i];
    }
    double* a = acc + 10 * bn[b];
    a[0] += m; a[1] += h[0]; a[2] += h[1]; a[3] += h[2];
    a[4] += Io[0][0]; a[5] += Io[0][1]; a[6] += Io[1][1];
    a[7] += Io[0][2]; a[8] += Io[1][2]; a[9] += Io[2][2];
  }
  return acc;
}

// The model arrives as two buffers (ffi.py: _buffers), one call operand each: ints =
// [nn, nb, kind, parent, qi, bias_to, first_body (nn each), body_node, fixed (nb each)],
// floats = [Xtree_E (nb x 9), Xtree_r (nb x 3), inertia (nb x 10), axes (nv x 6),
// armature (nv), gravity (3)], nv = nn - 1, and, when the model's leaves are constants of
// the program, the node inertias that follow from them: compact rows (nn x 10), then 6x6
// (nn x 36). Each operand costs the call a fixed time, so the thirteen arrays travel as
// two, and a constant model's node inertias are not rebuilt at every call.
Tree make_tree(const int32_t* mi, const double* mf, int64_t nf, bool six = true) {
  Tree t;
  t.nn = mi[0]; t.nb = mi[1];
  const int nn = t.nn, nb = t.nb, nv = nn - 1;
  t.kind = mi + 2; t.parent = t.kind + nn; t.qi = t.parent + nn; t.bias_to = t.qi + nn;
  t.first_body = t.bias_to + nn; t.body_node = t.first_body + nn; t.fixed = t.body_node + nb;
  t.E = mf; t.r = t.E + 9 * nb; t.inertia = t.r + 3 * nb; t.axes = t.inertia + 10 * nb;
  t.arm = t.axes + 6 * nv; t.g = t.arm + nv;
  const double* nodes = t.g + 3;
  const bool given = nf == (nodes - mf) + 46 * nn;  // a constant model's (ffi._buffers)
  t.Ik = given ? nodes : node_inertias(t, scratch<0>(10 * nn, 0.0).data());
  t.I0 = t.I = nullptr;
  if (!six) return t;  // the kernels that read only the compact rows
  if (given) {
    t.I0 = reinterpret_cast<const Mat6*>(nodes + 10 * nn);
  } else {
    Mat6* I0 = scratch<1>(nn, Mat6{}).data();
    for (int k = 0; k < nn; ++k) inertia6(&t.Ik[10 * k], I0[k]);
    t.I0 = I0;
  }
  t.I = scratch<23>(nn, Mat6{}).data();
  reset_inertias(t);
  return t;
}

// Xup = X_J Xtree of node k.
HOT void node_transform(const Tree& t, int k, const double* q, Xf& X) {
  double rJ[3];
  joint_transform(t.kind[k], t.axes + 6 * (k - 1), q + t.qi[k], X.E, rJ);
  const int b = t.first_body[k];
  X.identity = t.kind[k] == kInner && b < 0;
  if (b < 0) {
    for (int i = 0; i < 3; ++i) X.r[i] = rJ[i];
    return;
  }
  // X(EJ, rJ) X(E2, r2) = X(EJ E2, r2 + E2^T rJ)
  const double* E2 = t.E + 9 * b;
  double EJ[3][3];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) EJ[i][j] = X.E[i][j];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j)
      X.E[i][j] = EJ[i][0] * E2[j] + EJ[i][1] * E2[3 + j] + EJ[i][2] * E2[6 + j];
    X.r[i] = t.r[3 * b + i] + E2[i] * rJ[0] + E2[3 + i] * rJ[1] + E2[6 + i] * rJ[2];
  }
}

// The model's buffers, the same for every kernel (make_tree).
#define MODEL_ARGS ffi::Buffer<ffi::S32> model_i, ffi::Buffer<ffi::F64> model_f
#define MODEL_TREE \
  make_tree(model_i.typed_data(), model_f.typed_data(), model_f.element_count())
// the same without the 6x6 node inertias, for the kernels that read only the compact rows
#define MODEL_TREE_COMPACT \
  make_tree(model_i.typed_data(), model_f.typed_data(), model_f.element_count(), false)

// Velocities v, the joint velocities vJc each joint's last node collects, and Xup.
void velocities(const Tree& t, const double* q, const double* qd, std::vector<Xf>& Xup,
                std::vector<double>& v, std::vector<double>& vJc) {
  std::fill(v.begin(), v.begin() + 6, 0.0);  // the world is at rest
  std::fill(vJc.begin(), vJc.begin() + 6 * t.nn, 0.0);  // the loop adds into it
  for (int k = 1; k < t.nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    node_transform(t, k, q, Xup[k]);
    double vp[6];
    apply(Xup[k], &v[6 * t.parent[k]], vp);
    for (int i = 0; i < 6; ++i) {
      const double vJ = S[i] * qd[k - 1];
      v[6 * k + i] = vp[i] + vJ;
      vJc[6 * t.bias_to[k] + i] += vJ;
    }
  }
}

// ABA's outward pass (Featherstone 2008, Table 7.1, third loop) from the factors U, D and
// the joint forces u of the inward one: a_k = Xup_k a_p + c_k, qdd_k = (u_k - U_k . a_k) /
// D_k, a_k += S_k qdd_k. a holds the world's acceleration on entry; c == nullptr: at rest.
void aba_outward(const Tree& t, const std::vector<Xf>& Xup, const double* U, const double* D,
                 const double* u, const double* c, double* a, double* qdd) {
  for (int k = 1; k < t.nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    double ap[6], Ua = 0;
    apply(Xup[k], &a[6 * t.parent[k]], ap);
    for (int i = 0; i < 6; ++i) {
      if (c != nullptr) ap[i] += c[6 * k + i];
      Ua += U[6 * k + i] * ap[i];
    }
    const double x = (u[k] - Ua) / D[k];
    qdd[k - 1] = x;
    for (int i = 0; i < 6; ++i) a[6 * k + i] = ap[i] + S[i] * x;
  }
}

// What forward dynamics' reverse sweep (FdVjp) reads of the primal ABA, per node:
// Xup (E row-major, then r), v, vJc, a, U, D: kAux doubles per node, in blocks of nodes.
constexpr int kAux = 12 + 6 + 6 + 6 + 6 + 1;

// Forward dynamics, Featherstone (2008) Table 7.1, with the armature on D; with aux, the
// residuals of the reverse sweep (kAux, nn of each) go there too.
void aba_one(const Tree& t, const double* arm, const double* g, const double* q,
             const double* qd, const double* tau, double* qdd, double* aux = nullptr) {
  const int nn = t.nn;
  std::vector<Xf>& Xup = scratch<2>(nn, Xf{});
  Mat6* IA = t.I;  // articulated inertias start as the rigid ones
  std::vector<double>& v = scratch<3>(6 * nn, 0.0);
  std::vector<double>& vJc = scratch<4>(6 * nn, 0.0);
  std::vector<double>& c = scratch<5>(6 * nn, 0.0);
  std::vector<double>& pA = scratch<6>(6 * nn, 0.0);
  std::vector<double>& U = scratch<7>(6 * nn, 0.0);
  std::vector<double>& D = scratch<8>(nn, 1.0);
  std::vector<double>& u = scratch<9>(nn, 0.0);
  std::vector<double>& a = scratch<10>(6 * nn, 0.0);
  velocities(t, q, qd, Xup, v, vJc);
  for (int k = 1; k < nn; ++k) {
    double Iv[6];
    inertia_times(t.Ik + 10 * k, &v[6 * k], Iv);  // IA[k] is still the rigid inertia
    cross_force(&v[6 * k], Iv, &pA[6 * k]);
    cross_motion(&v[6 * k], &vJc[6 * k], &c[6 * k]);
  }
  for (int k = nn - 1; k >= 1; --k) {
    const double* S = t.axes + 6 * (k - 1);
    double* Uk = &U[6 * k];
    mv(IA[k], S, Uk);
    double d = arm[k - 1], sp = 0;
    for (int i = 0; i < 6; ++i) {
      d += S[i] * Uk[i];
      sp += S[i] * pA[6 * k + i];
    }
    D[k] = d;
    u[k] = tau[k - 1] - sp;
    const int p = t.parent[k];
    if (p == 0) continue;  // the world's articulated inertia is never read
    Mat6 Ia;
    double pa[6], Iac[6], f[6], Ud[6];
    const double dinv = 1 / d;  // one division per node, not 42
    for (int i = 0; i < 6; ++i) Ud[i] = Uk[i] * dinv;
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) Ia.m[i][j] = IA[k].m[i][j] - Ud[i] * Uk[j];
    mv(Ia, &c[6 * k], Iac);
    for (int i = 0; i < 6; ++i) pa[i] = pA[6 * k + i] + Iac[i] + Ud[i] * u[k];
    add_congruence(Xup[k], Ia, IA[p]);
    apply_T(Xup[k], pa, f);
    for (int i = 0; i < 6; ++i) pA[6 * p + i] += f[i];
  }
  // the world accelerates at -g: gravity without a force on every body
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  aba_outward(t, Xup, U.data(), D.data(), u.data(), c.data(), a.data(), qdd);
  if (aux == nullptr) return;
  double* X = aux;
  for (int k = 0; k < nn; ++k) {
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) X[12 * k + 3 * i + j] = Xup[k].E[i][j];
    for (int i = 0; i < 3; ++i) X[12 * k + 9 + i] = Xup[k].r[i];
  }
  double* rest = aux + 12 * nn;
  std::copy(v.begin(), v.end(), rest);
  std::copy(vJc.begin(), vJc.end(), rest + 6 * nn);
  std::copy(a.begin(), a.end(), rest + 12 * nn);
  std::copy(U.begin(), U.end(), rest + 18 * nn);
  std::copy(D.begin(), D.end(), rest + 24 * nn);
}

// The primal of forward dynamics' reverse mode: Aba, and the sweep's residuals (aux).
ffi::Error AbaAux(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                  ffi::Buffer<ffi::F64> tau_b, ffi::ResultBuffer<ffi::F64> qdd_b,
                  ffi::ResultBuffer<ffi::F64> aux_b) {
  Tree t = MODEL_TREE;
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B, nv = t.nn - 1;
  for (int64_t s = 0; s < B; ++s) {
    if (s) reset_inertias(t);
    aba_one(t, t.arm, t.g, q_b.typed_data() + s * nq,
            qd_b.typed_data() + s * nv, tau_b.typed_data() + s * nv,
            qdd_b->typed_data() + s * nv, aux_b->typed_data() + s * kAux * t.nn);
  }
  return ffi::Error::Success();
}

ffi::Error Aba(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
               ffi::Buffer<ffi::F64> tau_b, ffi::ResultBuffer<ffi::F64> qdd_b) {
  Tree t = MODEL_TREE;
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B, nv = t.nn - 1;
  for (int64_t s = 0; s < B; ++s) {
    if (s) reset_inertias(t);
    aba_one(t, t.arm, t.g, q_b.typed_data() + s * nq,
            qd_b.typed_data() + s * nv, tau_b.typed_data() + s * nv,
            qdd_b->typed_data() + s * nv);
  }
  return ffi::Error::Success();
}

// The subtree forces of RNEA's inward pass: each node's own force I a + v x* I v plus its
// children's, in its frame.
void subtree_forces(const Tree& t, const std::vector<Xf>& Xup, const std::vector<double>& v,
                    const std::vector<double>& a, std::vector<double>& f) {
  const int nn = t.nn;
  for (int k = 1; k < nn; ++k) {
    double Iv[6], Ia[6], vIv[6];
    inertia_times(t.Ik + 10 * k, &a[6 * k], Ia);
    inertia_times(t.Ik + 10 * k, &v[6 * k], Iv);
    cross_force(&v[6 * k], Iv, vIv);
    for (int i = 0; i < 6; ++i) f[6 * k + i] = Ia[i] + vIv[i];
  }
  for (int k = nn - 1; k >= 1; --k) {
    if (t.parent[k] == 0) continue;
    double fp[6];
    apply_T(Xup[k], &f[6 * k], fp);
    for (int i = 0; i < 6; ++i) f[6 * t.parent[k] + i] += fp[i];
  }
}

// RNEA's per-node quantities (rnea_passes): Xup, v, the joint velocities vJc, a and the
// subtree forces f, in per-thread buffers shared by the kernels that run the passes
// (which write every entry they read: velocities, rnea_passes).
struct Passes {
  std::vector<Xf>& Xup;
  std::vector<double>&v, &vJc, &a, &f;
  explicit Passes(int nn)
      : Xup(scratch_unset<2, Xf>(nn)), v(scratch_unset<3, double>(6 * nn)),
        vJc(scratch_unset<4, double>(6 * nn)), a(scratch_unset<10, double>(6 * nn)),
        f(scratch_unset<6, double>(6 * nn)) {}
};

// RNEA's passes (Featherstone 2008, Table 5.1): Xup, v, vJc, a and the subtree forces f
// (each node's own force plus its children's, in its frame).
void rnea_passes(const Tree& t, const double* q, const double* qd, const double* qdd,
                 const double* g, std::vector<Xf>& Xup, std::vector<double>& v,
                 std::vector<double>& vJc, std::vector<double>& a, std::vector<double>& f) {
  const int nn = t.nn;
  velocities(t, q, qd, Xup, v, vJc);
  a[0] = a[1] = a[2] = 0;
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    double ap[6], c[6];
    apply(Xup[k], &a[6 * t.parent[k]], ap);
    cross_motion(&v[6 * k], &vJc[6 * k], c);
    for (int i = 0; i < 6; ++i) a[6 * k + i] = ap[i] + S[i] * qdd[k - 1] + c[i];
  }
  subtree_forces(t, Xup, v, a, f);
}

// Inverse dynamics, Featherstone (2008) Table 5.1, with the armature's torque arm qdd.
void rnea_one(const Tree& t, const double* arm, const double* g, const double* q,
              const double* qd, const double* qdd, double* tau) {
  const int nn = t.nn;
  Passes P(nn);
  rnea_passes(t, q, qd, qdd, g, P.Xup, P.v, P.vJc, P.a, P.f);
  const std::vector<double>& f = P.f;
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    double x = arm[k - 1] * qdd[k - 1];
    for (int i = 0; i < 6; ++i) x += S[i] * f[6 * k + i];
    tau[k - 1] = x;
  }
}

ffi::Error Rnea(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                ffi::Buffer<ffi::F64> qdd_b, ffi::ResultBuffer<ffi::F64> tau_b) {
  Tree t = MODEL_TREE_COMPACT;
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B, nv = t.nn - 1;
  for (int64_t s = 0; s < B; ++s)
    rnea_one(t, t.arm, t.g, q_b.typed_data() + s * nq,
             qd_b.typed_data() + s * nv, qdd_b.typed_data() + s * nv,
             tau_b->typed_data() + s * nv);
  return ffi::Error::Success();
}

// The joint-space inertia matrix H + diag(armature), Featherstone (2008) Table 6.2.
// The mass matrix in world coordinates (Featherstone 2008, section 6.2, with the
// composite inertias and motion columns taken to the world frame, as Pinocchio does):
// node k's composite inertia C_k (the sum of its subtree's rigid inertias, compact rows
// about the world origin) and column S_k in world coordinates give F_k = C_k S_k, and
// H[a][k] = S_a . F_k for each ancestor a of k: a 6-term dot product per pair where the
// local-frame walk moves F through every transform on the way up.
void crba_one(const Tree& t, const double* arm, const double* q, double* H) {
  const int nn = t.nn, nv = nn - 1;
  std::vector<Xf>& X0 = scratch<2>(nn, Xf{});           // world -> node
  std::vector<double>& S0 = scratch<3>(6 * nn, 0.0);   // columns, world coordinates
  std::vector<double>& C = scratch<4>(10 * nn, 0.0);   // composite inertias, world
  X0[0].identity = true;
  for (int i = 0; i < 3; ++i) {
    X0[0].r[i] = 0;
    for (int j = 0; j < 3; ++j) X0[0].E[i][j] = i == j;
  }
  for (int k = 1; k < nn; ++k) {
    Xf X;
    node_transform(t, k, q, X);
    const Xf& P = X0[t.parent[k]];
    Xf& W = X0[k];
    if (X.identity) {
      W = P;
    } else {  // X(E, r) X(E_p, r_p) = X(E E_p, r_p + E_p^T r)
      W.identity = false;
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j)
          W.E[i][j] = X.E[i][0] * P.E[0][j] + X.E[i][1] * P.E[1][j] + X.E[i][2] * P.E[2][j];
        W.r[i] = P.r[i] + P.E[0][i] * X.r[0] + P.E[1][i] * X.r[1] + P.E[2][i] * X.r[2];
      }
    }
    // S in world coordinates: w0 = E^T w, v0 = E^T v + r x w0
    const double* S = t.axes + 6 * (k - 1);
    double* s0 = &S0[6 * k];
    for (int i = 0; i < 3; ++i) {
      s0[i] = W.E[0][i] * S[0] + W.E[1][i] * S[1] + W.E[2][i] * S[2];
      s0[3 + i] = W.E[0][i] * S[3] + W.E[1][i] * S[4] + W.E[2][i] * S[5];
    }
    const double* r = W.r;
    s0[3] += r[1] * s0[2] - r[2] * s0[1];
    s0[4] += r[2] * s0[0] - r[0] * s0[2];
    s0[5] += r[0] * s0[1] - r[1] * s0[0];
    // the node's rigid inertia about the world origin: rotate (E^T I E, E^T h), then move
    // the reference point from the node's origin to the world's (make_tree's rule)
    const double* I = t.Ik + 10 * k;
    double* c = &C[10 * k];
    const double m = I[0];
    const double Io[3][3] = {{I[4], I[5], I[7]}, {I[5], I[6], I[8]}, {I[7], I[8], I[9]}};
    double T[3][3], Iw[3][3], h[3];
    for (int i = 0; i < 3; ++i) {
      h[i] = W.E[0][i] * I[1] + W.E[1][i] * I[2] + W.E[2][i] * I[3];
      for (int j = 0; j < 3; ++j)
        T[i][j] = Io[i][0] * W.E[0][j] + Io[i][1] * W.E[1][j] + Io[i][2] * W.E[2][j];
    }
    for (int i = 0; i < 3; ++i)
      for (int j = i; j < 3; ++j)
        Iw[i][j] = W.E[0][i] * T[0][j] + W.E[1][i] * T[1][j] + W.E[2][i] * T[2][j];
    const double rr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2];
    const double rh = r[0] * h[0] + r[1] * h[1] + r[2] * h[2];
    auto shifted = [&](int i, int j) {
      return Iw[i][j] + (i == j) * (m * rr + 2 * rh) - m * r[i] * r[j] - h[i] * r[j] - r[i] * h[j];
    };
    c[0] = m;
    c[1] = h[0] + m * r[0]; c[2] = h[1] + m * r[1]; c[3] = h[2] + m * r[2];
    c[4] = shifted(0, 0); c[5] = shifted(0, 1); c[6] = shifted(1, 1);
    c[7] = shifted(0, 2); c[8] = shifted(1, 2); c[9] = shifted(2, 2);
  }
  for (int k = nn - 1; k >= 1; --k)
    if (t.parent[k] != 0)
      for (int i = 0; i < 10; ++i) C[10 * t.parent[k] + i] += C[10 * k + i];
  for (int i = 0; i < nv * nv; ++i) H[i] = 0;
  for (int k = 1; k < nn; ++k) {
    const double* s0 = &S0[6 * k];
    double F[6];
    inertia_times(&C[10 * k], s0, F);
    H[(k - 1) * nv + (k - 1)] = arm[k - 1] + dot6(s0, F);
    for (int a = t.parent[k]; a != 0; a = t.parent[a]) {
      const double x = dot6(&S0[6 * a], F);
      H[(k - 1) * nv + (a - 1)] = x;
      H[(a - 1) * nv + (k - 1)] = x;
    }
  }
}

ffi::Error Crba(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::ResultBuffer<ffi::F64> H_b) {
  Tree t = MODEL_TREE_COMPACT;
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B, nv = t.nn - 1;
  for (int64_t s = 0; s < B; ++s)
    crba_one(t, t.arm, q_b.typed_data() + s * nq,
             H_b->typed_data() + s * nv * nv);
  return ffi::Error::Success();
}


// The adjoint of y = X x (X = X(E, r), x = [w; u] a motion vector) for the cotangent
// yb: Eb += yb_w w^T + yb_v (u - r x w)^T, rb += (E^T yb_v) x w.
void apply_adjoint(const Xf& X, const double* x, const double* yb, double* Eb, double* rb) {
  const double* r = X.r;
  const double t[3] = {x[3] - (r[1] * x[2] - r[2] * x[1]), x[4] - (r[2] * x[0] - r[0] * x[2]),
                       x[5] - (r[0] * x[1] - r[1] * x[0])};
  double Ety[3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) Eb[3 * i + j] += yb[i] * x[j] + yb[3 + i] * t[j];
    Ety[i] = X.E[0][i] * yb[3] + X.E[1][i] * yb[4] + X.E[2][i] * yb[5];
  }
  rb[0] += Ety[1] * x[2] - Ety[2] * x[1];
  rb[1] += Ety[2] * x[0] - Ety[0] * x[2];
  rb[2] += Ety[0] * x[1] - Ety[1] * x[0];
}

// Cb += d (y^T I(c) x) / dc for the compact inertia c = [m, h, Ixx, Ixy, Iyy, Ixz, Iyz,
// Izz]: y^T I x = y_w^T I_o x_w + y_w . (h x x_v) - y_v . (h x x_w) + m y_v . x_v.
void inertia_adjoint(const double* y, const double* x, double* Cb) {
  Cb[0] += y[3] * x[3] + y[4] * x[4] + y[5] * x[5];
  // h . (x_v x y_w - x_w x y_v)
  Cb[1] += (x[4] * y[2] - x[5] * y[1]) - (x[1] * y[5] - x[2] * y[4]);
  Cb[2] += (x[5] * y[0] - x[3] * y[2]) - (x[2] * y[3] - x[0] * y[5]);
  Cb[3] += (x[3] * y[1] - x[4] * y[0]) - (x[0] * y[4] - x[1] * y[3]);
  Cb[4] += y[0] * x[0];
  Cb[5] += y[0] * x[1] + y[1] * x[0];
  Cb[6] += y[1] * x[1];
  Cb[7] += y[0] * x[2] + y[2] * x[0];
  Cb[8] += y[1] * x[2] + y[2] * x[1];
  Cb[9] += y[2] * x[2];
}


// The cotangent of a unit quaternion's rotation R (child ->
// parent, quat_R) taken on to the quaternion's raw components q (normalised inside).
void quat_R_adjoint(const double* q, const double Rb[3][3], double* qb) {
  const double n = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  const double ub[4] = {
      2 * (-z * Rb[0][1] + y * Rb[0][2] + z * Rb[1][0] - x * Rb[1][2] - y * Rb[2][0] +
           x * Rb[2][1]),
      2 * (y * Rb[0][1] + z * Rb[0][2] + y * Rb[1][0] - 2 * x * Rb[1][1] - w * Rb[1][2] +
           z * Rb[2][0] + w * Rb[2][1] - 2 * x * Rb[2][2]),
      2 * (-2 * y * Rb[0][0] + x * Rb[0][1] + w * Rb[0][2] + x * Rb[1][0] + z * Rb[1][2] -
           w * Rb[2][0] + z * Rb[2][1] - 2 * y * Rb[2][2]),
      2 * (-2 * z * Rb[0][0] - w * Rb[0][1] + x * Rb[0][2] + w * Rb[1][0] - 2 * z * Rb[1][1] +
           y * Rb[1][2] + x * Rb[2][0] + y * Rb[2][1])};
  const double u[4] = {w, x, y, z};
  const double uu = u[0] * ub[0] + u[1] * ub[1] + u[2] * ub[2] + u[3] * ub[3];
  for (int i = 0; i < 4; ++i) qb[i] += (ub[i] - u[i] * uu) / n;
}

// Node k's Xup = X_J(q) Xtree and S = axes[k - 1] read with cotangents Eb, rb, Sb: add
// theirs to Xtree (XEb, Xrb, per body), the node's axes row axb and q (qb).
void joint_transform_adjoint(const Tree& t, int k, const double* q, const double* Eb,
                             const double* rb, const double* Sb, double* XEb, double* Xrb,
                             double* axb, double* qb) {
  const double* S = t.axes + 6 * (k - 1);
  for (int i = 0; i < 6; ++i) axb[i] += Sb[i];
  double EJ[3][3], rJ[3], EJb[3][3], rJb[3];
  joint_transform(t.kind[k], S, q + t.qi[k], EJ, rJ);
  const int b = t.first_body[k];
  if (b >= 0) {
    // X(EJ E2, r2 + E2^T rJ)
    const double* E2 = t.E + 9 * b;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        EJb[i][j] = Eb[3 * i] * E2[3 * j] + Eb[3 * i + 1] * E2[3 * j + 1] +
                    Eb[3 * i + 2] * E2[3 * j + 2];
        XEb[9 * b + 3 * i + j] += EJ[0][i] * Eb[j] + EJ[1][i] * Eb[3 + j] +
                                  EJ[2][i] * Eb[6 + j] + rJ[i] * rb[j];
      }
      Xrb[3 * b + i] += rb[i];
      rJb[i] = E2[3 * i] * rb[0] + E2[3 * i + 1] * rb[1] + E2[3 * i + 2] * rb[2];
    }
  } else {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) EJb[i][j] = Eb[3 * i + j];
      rJb[i] = rb[i];
    }
  }
  double Rb[3][3];  // E_J = R^T
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) Rb[i][j] = EJb[j][i];
  double* qk = qb + t.qi[k];
  const int kind = t.kind[k];
  if (kind == kFree) {
    for (int i = 0; i < 3; ++i) qk[i] += rJb[i];
    quat_R_adjoint(q + t.qi[k] + 3, Rb, qk + 3);
  } else if (kind == kSpherical) {
    quat_R_adjoint(q + t.qi[k], Rb, qk);
  } else if (kind == kTranslation) {
    for (int i = 0; i < 3; ++i) qk[i] += rJb[i];
  } else if (kind == kScrew) {
    // R = 1 + s W + (1 - c) W^2 (W = w^), r = wv - R wv + (w (w.v) + (1 - w.w) v) q
    const double* w = S;
    const double* v = S + 3;
    const double th = q[t.qi[k]], s = std::sin(th), c = std::cos(th);
    double W[3][3], W2[3][3], R[3][3];
    skew(w, W);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        W2[i][j] = W[i][0] * W[0][j] + W[i][1] * W[1][j] + W[i][2] * W[2][j];
        R[i][j] = (i == j) + s * W[i][j] + (1 - c) * W2[i][j];
      }
    const double wv[3] = {w[1] * v[2] - w[2] * v[1], w[2] * v[0] - w[0] * v[2],
                          w[0] * v[1] - w[1] * v[0]};
    const double wdv = w[0] * v[0] + w[1] * v[1] + w[2] * v[2];
    const double ww = w[0] * w[0] + w[1] * w[1] + w[2] * w[2];
    const double wr = w[0] * rJb[0] + w[1] * rJb[1] + w[2] * rJb[2];
    const double vr = v[0] * rJb[0] + v[1] * rJb[1] + v[2] * rJb[2];
    double wvb[3], wb[3] = {0, 0, 0}, vb[3] = {0, 0, 0}, dq = 0;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) Rb[i][j] -= rJb[i] * wv[j];
      wvb[i] = rJb[i] - (R[0][i] * rJb[0] + R[1][i] * rJb[1] + R[2][i] * rJb[2]);
      dq += rJb[i] * (w[i] * wdv + (1 - ww) * v[i]);
      wb[i] += th * (wdv * rJb[i] + wr * v[i] - 2 * vr * w[i]);
      vb[i] += th * (wr * w[i] + (1 - ww) * rJb[i]);
    }
    // wv = w x v
    wb[0] += v[1] * wvb[2] - v[2] * wvb[1];
    wb[1] += v[2] * wvb[0] - v[0] * wvb[2];
    wb[2] += v[0] * wvb[1] - v[1] * wvb[0];
    vb[0] += wvb[1] * w[2] - wvb[2] * w[1];
    vb[1] += wvb[2] * w[0] - wvb[0] * w[2];
    vb[2] += wvb[0] * w[1] - wvb[1] * w[0];
    // R's own: dR/dq = c W + s W^2; dR/dW = s dW + (1 - c) (dW W + W dW)
    double G[3][3];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        dq += Rb[i][j] * (c * W[i][j] + s * W2[i][j]);
        double RWt = 0, WtR = 0;
        for (int l = 0; l < 3; ++l) {
          RWt += Rb[i][l] * W[j][l];
          WtR += W[l][i] * Rb[l][j];
        }
        G[i][j] = s * Rb[i][j] + (1 - c) * (RWt + WtR);
      }
    wb[0] += G[2][1] - G[1][2];
    wb[1] += G[0][2] - G[2][0];
    wb[2] += G[1][0] - G[0][1];
    qk[0] += dq;
    for (int i = 0; i < 3; ++i) {
      axb[i] += wb[i];
      axb[3 + i] += vb[i];
    }
  }
}

// The node inertias' cotangents Ib (compact, per node) taken on to the bodies'
// inertias (inb) and, for bodies welded by fixed joints, their placements (make_tree).
void node_inertias_adjoint(const Tree& t, const int32_t* bn, const int32_t* fx, int nb,
                           const double* inertia, const double* Ib, double* XEb,
                           double* Xrb, double* inb) {
  for (int b = 1; b < nb; ++b) {
    if (bn[b] == 0) continue;
    const double* cb = Ib + 10 * bn[b];
    double* out = inb + 10 * b;
    if (!fx[b]) {
      for (int i = 0; i < 10; ++i) out[i] += cb[i];
      continue;
    }
    const double* I = inertia + 10 * b;
    const double m = I[0];
    const double h[3] = {I[1], I[2], I[3]};
    const double Io[3][3] = {{I[4], I[5], I[7]}, {I[5], I[6], I[8]}, {I[7], I[8], I[9]}};
    const double* E = t.E + 9 * b;
    const double* p = t.r + 3 * b;
    // the symmetric matrix whose inner product with I_o gives the compact cotangent
    const double G[3][3] = {{cb[4], cb[5] / 2, cb[7] / 2},
                            {cb[5] / 2, cb[6], cb[8] / 2},
                            {cb[7] / 2, cb[8] / 2, cb[9]}};
    const double trG = G[0][0] + G[1][1] + G[2][2];
    double hp[3], Gp[3], Ghp[3], hpb[3], pb[3];
    for (int i = 0; i < 3; ++i) hp[i] = E[i] * h[0] + E[3 + i] * h[1] + E[6 + i] * h[2];
    double pp = 0, ph = 0, pGp = 0, phn = 0;
    for (int i = 0; i < 3; ++i) {
      Gp[i] = G[i][0] * p[0] + G[i][1] * p[1] + G[i][2] * p[2];
      Ghp[i] = G[i][0] * hp[0] + G[i][1] * hp[1] + G[i][2] * hp[2];
      pp += p[i] * p[i];
      ph += p[i] * hp[i];
      phn += p[i] * cb[1 + i];
    }
    for (int i = 0; i < 3; ++i) pGp += p[i] * Gp[i];
    // I_0 = E^T I_o E + (m |p|^2 + 2 p.h') 1 - m p p^T - h' p^T - p h'^T, h_0 = h' + m p
    double mb = cb[0] + pp * trG - pGp + phn;
    for (int i = 0; i < 3; ++i) {
      pb[i] = 2 * m * p[i] * trG + 2 * hp[i] * trG - 2 * m * Gp[i] - 2 * Ghp[i] + m * cb[1 + i];
      hpb[i] = 2 * p[i] * trG - 2 * Gp[i] + cb[1 + i];
    }
    (void)ph;
    out[0] += mb;
    // h' = E^T h; I_p = E^T I_o E: I_o's cotangent E G E^T, E's 2 I_o E G + h h'b^T
    double EG[3][3], Iob[3][3], IoE[3][3];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        EG[i][j] = E[3 * i] * G[0][j] + E[3 * i + 1] * G[1][j] + E[3 * i + 2] * G[2][j];
        IoE[i][j] = Io[i][0] * E[j] + Io[i][1] * E[3 + j] + Io[i][2] * E[6 + j];
      }
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        Iob[i][j] = EG[i][0] * E[3 * j] + EG[i][1] * E[3 * j + 1] + EG[i][2] * E[3 * j + 2];
    for (int i = 0; i < 3; ++i) {
      out[1 + i] += E[3 * i] * hpb[0] + E[3 * i + 1] * hpb[1] + E[3 * i + 2] * hpb[2];
      for (int j = 0; j < 3; ++j) {
        double x = h[i] * hpb[j];
        for (int l = 0; l < 3; ++l) x += 2 * IoE[i][l] * G[l][j];
        XEb[9 * b + 3 * i + j] += x;
      }
      Xrb[3 * b + i] += pb[i];
    }
    out[4] += Iob[0][0];
    out[5] += Iob[0][1] + Iob[1][0];
    out[6] += Iob[1][1];
    out[7] += Iob[0][2] + Iob[2][0];
    out[8] += Iob[1][2] + Iob[2][1];
    out[9] += Iob[2][2];
  }
}

// The cotangent outputs of the reverse sweeps (the order of BIND_VJP's results).
struct VjpOut {
  double *XEb, *Xrb, *inb, *axb, *armb, *gb, *qb, *qdb, *qddb;
};

#define VJP_RETS                                                                          \
  ffi::ResultBuffer<ffi::F64> XEb_b, ffi::ResultBuffer<ffi::F64> Xrb_b,                   \
      ffi::ResultBuffer<ffi::F64> inertiab_b, ffi::ResultBuffer<ffi::F64> axesb_b,        \
      ffi::ResultBuffer<ffi::F64> armb_b, ffi::ResultBuffer<ffi::F64> gb_b,               \
      ffi::ResultBuffer<ffi::F64> qb_b, ffi::ResultBuffer<ffi::F64> qdb_b,                \
      ffi::ResultBuffer<ffi::F64> qddb_b, ffi::RemainingRets zeros
#define VJP_OUT                                                                           \
  VjpOut{XEb_b->typed_data(), Xrb_b->typed_data(), inertiab_b->typed_data(),             \
         axesb_b->typed_data(), armb_b->typed_data(), gb_b->typed_data(),                 \
         qb_b->typed_data(),  qdb_b->typed_data(),  qddb_b->typed_data()}

// Zero the remaining results (the cotangents of the leaves the dynamics do not read).
ffi::Error zero_all(ffi::RemainingRets& zeros) {
  for (size_t i = 0; i < zeros.size(); ++i) {
    auto z = zeros.get<ffi::AnyBuffer>(i);
    if (z.has_error()) return z.error();
    std::memset((*z)->untyped_data(), 0, (*z)->size_bytes());
  }
  return ffi::Error::Success();
}

// The vector-Jacobian product of inverse dynamics: for the cotangent lam of tau, the
// cotangents of qd, qdd and of the per-node quantities the recursion reads: Xup = X(E, r)
// (E (nn, 3, 3), r (nn, 3)), S (nn, 6), the node inertias (nn, 10, compact), gravity and
// the armature. jaxrbd._core.ffi takes them on to the model's leaves and q through the
// per-node maps (jaxrbd._core.nodes.Xup_and_S, jcalc.node_inertias). The reverse sweep of
// Rnea's two passes, Griewank & Walther (2008) in Featherstone's notation, given the primal
// passes' Xup, v, vJc, a and subtree forces F (rnea_passes); nq coordinates.
void rnea_sweep(const Tree& t, const double* q, int64_t nq, const double* qd,
                const double* qdd, const double* lam, const std::vector<Xf>& Xup,
                const std::vector<double>& v, const std::vector<double>& vJc,
                const std::vector<double>& a, const std::vector<double>& F, VjpOut o) {
  const int nn = t.nn;
  const double* arm = t.arm;
  std::vector<double>& Fb = scratch<5>(6 * nn, 0.0);
  std::vector<double>& ab = scratch<7>(6 * nn, 0.0);
  std::vector<double>& vb = scratch<8>(6 * nn, 0.0);
  std::vector<double>& wb = scratch<9>(6 * nn, 0.0);
  double* qdb = o.qdb;
  double* qddb = o.qddb;
  double* gb = o.gb;
  double* armb = o.armb;
  // the cotangents of what the recursion reads per node: Xup = X(E, r), S, inertia
  double* Eb = scratch<11>(9 * nn, 0.0).data();
  double* rb = scratch<12>(3 * nn, 0.0).data();
  double* Sb = scratch<13>(6 * nn, 0.0).data();
  double* Ib = scratch<14>(10 * nn, 0.0).data();
  // adjoint of the force pass, root to leaves: Fb_k = S_k lam_k + Xup_k Fb_p, and of
  // f_k = I_k a_k + v_k x* (I_k v_k) at every node
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    const int p = t.parent[k];
    double* Fbk = &Fb[6 * k];
    if (p != 0) {
      apply(Xup[k], &Fb[6 * p], Fbk);
      apply_adjoint(Xup[k], &Fb[6 * p], &F[6 * k], &Eb[9 * k], &rb[3 * k]);
    } else {
      for (int i = 0; i < 6; ++i) Fbk[i] = 0;
    }
    for (int i = 0; i < 6; ++i) {
      Fbk[i] += S[i] * lam[k - 1];
      Sb[6 * k + i] = lam[k - 1] * F[6 * k + i];
    }
    armb[k - 1] = lam[k - 1] * qdd[k - 1];
    qddb[k - 1] = arm[k - 1] * lam[k - 1];
    qdb[k - 1] = 0;
    // f = I a + v x* h, h = I v: ab += I Fb; vb += -(Fb x* h) + I hb, hb = -(v x Fb)
    const double* vk = &v[6 * k];
    double IFb[6], h[6], Fbh[6], hb[6], Ihb[6];
    inertia_times(t.Ik + 10 * k, Fbk, IFb);
    inertia_times(t.Ik + 10 * k, vk, h);
    cross_force(Fbk, h, Fbh);
    cross_motion(vk, Fbk, hb);
    for (int i = 0; i < 6; ++i) hb[i] = -hb[i];
    inertia_times(t.Ik + 10 * k, hb, Ihb);
    for (int i = 0; i < 6; ++i) {
      ab[6 * k + i] = IFb[i];
      vb[6 * k + i] = Ihb[i] - Fbh[i];
      wb[6 * k + i] = 0;
    }
    inertia_adjoint(Fbk, &a[6 * k], &Ib[10 * k]);
    inertia_adjoint(hb, vk, &Ib[10 * k]);
  }
  for (int i = 0; i < 6; ++i) ab[i] = vb[i] = wb[i] = 0;
  // adjoint of the motion pass, leaves to root: a_k = Xup_k a_p + S_k qdd_k + v_k x w_k
  // (w_k = vJc_k), v_k = Xup_k v_p + S_k qd_k
  for (int k = nn - 1; k >= 1; --k) {
    const double* S = t.axes + 6 * (k - 1);
    const int p = t.parent[k];
    double* abk = &ab[6 * k];
    double* vbk = &vb[6 * k];
    double s = 0;
    for (int i = 0; i < 6; ++i) {
      s += S[i] * abk[i];
      Sb[6 * k + i] += qdd[k - 1] * abk[i];
    }
    qddb[k - 1] += s;
    // c = v x w: wb += -(v x* cb), vb += w x* cb (cb = ab)
    double vc[6], wc[6];
    cross_force(&v[6 * k], abk, vc);
    cross_force(&vJc[6 * k], abk, wc);
    for (int i = 0; i < 6; ++i) {
      wb[6 * k + i] -= vc[i];
      vbk[i] += wc[i];
    }
    double tp[6];
    apply_T(Xup[k], abk, tp);
    apply_adjoint(Xup[k], &a[6 * p], abk, &Eb[9 * k], &rb[3 * k]);
    for (int i = 0; i < 6; ++i) ab[6 * p + i] += tp[i];
    s = 0;
    for (int i = 0; i < 6; ++i) {
      s += S[i] * vbk[i];
      Sb[6 * k + i] += qd[k - 1] * vbk[i];
    }
    qdb[k - 1] += s;
    apply_T(Xup[k], vbk, tp);
    apply_adjoint(Xup[k], &v[6 * p], vbk, &Eb[9 * k], &rb[3 * k]);
    for (int i = 0; i < 6; ++i) vb[6 * p + i] += tp[i];
  }
  // the joint velocities each bias target collects: w_b = sum_j S_j qd_j (bias_to[j] = b)
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    const double* w = &wb[6 * t.bias_to[k]];
    double s = 0;
    for (int i = 0; i < 6; ++i) {
      s += S[i] * w[i];
      Sb[6 * k + i] += qd[k - 1] * w[i];
    }
    qdb[k - 1] += s;
  }
  gb[0] = -ab[3]; gb[1] = -ab[4]; gb[2] = -ab[5];
  // on to the model's leaves and q (the per-node maps of Xup_and_S and node_inertias)
  const int nb = t.nb;
  std::fill(o.XEb, o.XEb + 9 * nb, 0.0);
  std::fill(o.Xrb, o.Xrb + 3 * nb, 0.0);
  std::fill(o.inb, o.inb + 10 * nb, 0.0);
  std::fill(o.axb, o.axb + 6 * (nn - 1), 0.0);
  std::fill(o.qb, o.qb + nq, 0.0);
  for (int k = 1; k < nn; ++k)
    joint_transform_adjoint(t, k, q, &Eb[9 * k], &rb[3 * k], &Sb[6 * k], o.XEb, o.Xrb,
                            &o.axb[6 * (k - 1)], o.qb);
  node_inertias_adjoint(t, t.body_node, t.fixed, nb, t.inertia, Ib, o.XEb, o.Xrb, o.inb);
}

// The results of state s of a batch (BIND_VJP's order; q has nq coordinates).
VjpOut vjp_out(VjpOut o, const Tree& t, int64_t nq, int64_t s) {
  const int64_t nb = t.nb, nv = t.nn - 1;
  return VjpOut{o.XEb + s * 9 * nb, o.Xrb + s * 3 * nb, o.inb + s * 10 * nb,
                o.axb + s * 6 * nv,  o.armb + s * nv,  o.gb + s * 3,
                o.qb + s * nq,       o.qdb + s * nv,   o.qddb + s * nv};
}

// One state, or a batch of B (q (B, nq), every other state buffer and every result with
// the same leading axis).
ffi::Error RneaVjp(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                   ffi::Buffer<ffi::F64> qdd_b, ffi::Buffer<ffi::F64> lam_b, VJP_RETS) {
  Tree t = MODEL_TREE_COMPACT;
  const int nn = t.nn, nv = nn - 1;
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B;
  Passes P(nn);
  auto& [Xup, v, vJc, a, F] = P;
  for (int64_t s = 0; s < B; ++s) {
    const double* q = q_b.typed_data() + s * nq;
    const double* qd = qd_b.typed_data() + s * nv;
    const double* qdd = qdd_b.typed_data() + s * nv;
    rnea_passes(t, q, qd, qdd, t.g, Xup, v, vJc, a, F);
    rnea_sweep(t, q, nq, qd, qdd, lam_b.typed_data() + s * nv, Xup, v, vJc, a, F,
               vjp_out(VJP_OUT, t, nq, s));
  }
  return zero_all(zeros);
}

// Forward dynamics' reverse sweep: lam is the cotangent of the solved qdd, whose tangent
// is dqdd = H^-1 (dtau - dID). The primal ABA's residuals (aux: AbaAux) give Xup, v, vJc,
// a and the factors U, D of H (Featherstone 2008, Table 7.1), so u = H^-1 lam is ABA's
// last two passes at rest (qd = 0, g = 0: no bias forces) without its articulated
// inertias, and the sweep runs on -u without RNEA's passes; u, the cotangent of tau,
// goes out in place of qdd's.
ffi::Error FdVjp(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                 ffi::Buffer<ffi::F64> qdd_b, ffi::Buffer<ffi::F64> lam_b,
                 ffi::Buffer<ffi::F64> aux_b, VJP_RETS) {
  Tree t = MODEL_TREE_COMPACT;
  const int nn = t.nn, nv = nn - 1;
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B;
  Passes P(nn);
  auto& [Xup, v, vJc, a, F] = P;
  double* u = scratch<24>(nn, 0.0).data();
  double* pA = scratch<25>(6 * nn, 0.0).data();
  double* acc = scratch<26>(6 * nn, 0.0).data();  // the world at rest: a_0 = 0
  double* minus_u = scratch<27>(nv, 0.0).data();
  double* udd = scratch<28>(nv, 0.0).data();
  for (int64_t s = 0; s < B; ++s) {
    const double* aux = aux_b.typed_data() + s * kAux * nn;
    const double* lam = lam_b.typed_data() + s * nv;
    for (int k = 1; k < nn; ++k) {
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) Xup[k].E[i][j] = aux[12 * k + 3 * i + j];
      for (int i = 0; i < 3; ++i) Xup[k].r[i] = aux[12 * k + 9 + i];
      Xup[k].identity = t.kind[k] == kInner && t.first_body[k] < 0;
    }
    const double* rest = aux + 12 * nn;
    std::copy(rest, rest + 6 * nn, v.begin());
    std::copy(rest + 6 * nn, rest + 12 * nn, vJc.begin());
    std::copy(rest + 12 * nn, rest + 18 * nn, a.begin());
    const double* U = rest + 18 * nn;
    const double* D = rest + 24 * nn;
    // u = H^-1 lam: the inward pass of the bias forces pA, then the outward one
    std::fill(pA, pA + 6 * nn, 0.0);
    for (int k = nn - 1; k >= 1; --k) {
      const double* S = t.axes + 6 * (k - 1);
      double sp = 0;
      for (int i = 0; i < 6; ++i) sp += S[i] * pA[6 * k + i];
      u[k] = lam[k - 1] - sp;
      const int p = t.parent[k];
      if (p == 0) continue;
      double pa[6], f[6];
      for (int i = 0; i < 6; ++i) pa[i] = pA[6 * k + i] + U[6 * k + i] * u[k] / D[k];
      apply_T(Xup[k], pa, f);
      for (int i = 0; i < 6; ++i) pA[6 * p + i] += f[i];
    }
    aba_outward(t, Xup, U, D, u, nullptr, acc, udd);
    for (int i = 0; i < nv; ++i) minus_u[i] = -udd[i];
    subtree_forces(t, Xup, v, a, F);
    const VjpOut o = vjp_out(VJP_OUT, t, nq, s);
    const double* q = q_b.typed_data() + s * nq;
    rnea_sweep(t, q, nq, qd_b.typed_data() + s * nv, qdd_b.typed_data() + s * nv, minus_u,
               Xup, v, vJc, a, F, o);
    // the sweep wrote qdd's cotangent; forward dynamics returns tau's, u, there instead
    std::copy(udd, udd + nv, o.qddb);
  }
  return zero_all(zeros);
}

// X^-1 m = [E^T w; E^T v + r x E^T w]: a node-frame motion vector in world coordinates.
void apply_inv(const Xf& X, const double* m, double* o) {
  for (int i = 0; i < 3; ++i) {
    o[i] = X.E[0][i] * m[0] + X.E[1][i] * m[1] + X.E[2][i] * m[2];
    o[3 + i] = X.E[0][i] * m[3] + X.E[1][i] * m[4] + X.E[2][i] * m[5];
  }
  const double* r = X.r;
  o[3] += r[1] * o[2] - r[2] * o[1];
  o[4] += r[2] * o[0] - r[0] * o[2];
  o[5] += r[0] * o[1] - r[1] * o[0];
}


void cross3(const double* a, const double* b, double* o) {
  o[0] = a[1] * b[2] - a[2] * b[1];
  o[1] = a[2] * b[0] - a[0] * b[2];
  o[2] = a[0] * b[1] - a[1] * b[0];
}

// The derivatives of the dynamics, Carpentier & Mansard (2018) in world coordinates as
// jaxrbd._derivatives computes them (its docstring has the derivation), all (nv, nv)
// row-major. Solve (forward dynamics): x = tau -> qdd, d qdd / dq (tangent coordinates),
// d qdd / dqd and H^-1; else (inverse dynamics): x = qdd -> tau, d tau / dq, d tau / dqd
// and H. Tables per DoF i: p[i] (the DoF a tangent step of i moves), nu[i], lam[i]
// (nodes: the last node of its joint and that node's parent), and the (nv, nv) masks
// sub_q, anc_q, sub_v, anc_v of jaxrbd._core.topology.
// The per-DoF tables of the derivatives (their handler's arguments after the model's).
struct DerivativeTables {
  const int32_t *P, *NU, *LAM, *subq, *ancq, *subv, *ancv;
};

template <bool Solve>
void state_derivatives_one(const Tree& t, const DerivativeTables& d, const double* arm,
                           const double* g, const double* q, const double* qd,
                           const double* tau, double* out, double* Jq, double* Jv,
                           double* M) {
  const int nn = t.nn, nv = nn - 1;
  const int32_t *P = d.P, *NU = d.NU, *LAM = d.LAM;
  const int32_t *subq = d.subq, *ancq = d.ancq, *subv = d.subv, *ancv = d.ancv;
  std::vector<Xf>& Xup = scratch<2>(nn, Xf{});
  std::vector<Xf>& X0 = scratch<3>(nn, Xf{});
  std::vector<double>& v = scratch<4>(6 * nn, 0.0);
  std::vector<double>& vJc = scratch<5>(6 * nn, 0.0);
  std::vector<double>& a = scratch<6>(6 * nn, 0.0);
  std::vector<double>& vw = scratch<7>(6 * nn, 0.0);
  std::vector<double>& aw = scratch<8>(6 * nn, 0.0);
  std::vector<double>& Sw = scratch<9>(6 * nn, 0.0);
  std::vector<Mat6>& Iw = scratch<10>(nn, Mat6{});
  std::vector<Mat6>& IC = scratch<11>(nn, Mat6{});
  std::vector<double>& A = scratch<12>(9 * nn, 0.0);   // composite angular block
  std::vector<double>& Pm = scratch<13>(6 * nn, 0.0);  // composite momentum
  std::vector<double>& G = scratch<14>(6 * nn, 0.0);   // composite force
  std::vector<double>& y = scratch<15>(6 * nn, 0.0);
  std::vector<double>& H = scratch<16>(nv * nv, 0.0);
  std::vector<double>& dq = scratch<17>(nv * nv, 0.0);
  std::vector<double>& dv = scratch<18>(nv * nv, 0.0);
  std::vector<double>& vecs = scratch<19>(48 * nn, 0.0);  // per DoF: w u c Phi Psi z
  double* qdd = scratch<22>(nv, 0.0).data();
  // node velocities and accelerations at qdd = 0 (node frames), the world transforms
  velocities(t, q, qd, Xup, v, vJc);
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) X0[0].E[i][j] = (i == j);
    X0[0].r[i] = 0;
  }
  for (int i = 0; i < 6; ++i) { aw[i] = a[i]; vw[i] = 0; }
  for (int k = 1; k < nn; ++k) {
    const int pk = t.parent[k];
    double ap[6], c[6];
    apply(Xup[k], &a[6 * pk], ap);
    cross_motion(&v[6 * k], &vJc[6 * k], c);
    for (int i = 0; i < 6; ++i) a[6 * k + i] = ap[i] + c[i];
    // X0_k = Xup_k X0_p: E = E_k E_p, r = r_p + E_p^T r_k
    const Xf &Xk = Xup[k], &Xp = X0[pk];
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j)
        X0[k].E[i][j] = Xk.E[i][0] * Xp.E[0][j] + Xk.E[i][1] * Xp.E[1][j] + Xk.E[i][2] * Xp.E[2][j];
      X0[k].r[i] = Xp.r[i] + Xp.E[0][i] * Xk.r[0] + Xp.E[1][i] * Xk.r[1] + Xp.E[2][i] * Xk.r[2];
    }
    X0[k].identity = false;
    apply_inv(X0[k], &v[6 * k], &vw[6 * k]);
    apply_inv(X0[k], &a[6 * k], &aw[6 * k]);
    apply_inv(X0[k], t.axes + 6 * (k - 1), &Sw[6 * k]);
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) Iw[k].m[i][j] = 0;
    add_congruence(X0[k], t.I[k], Iw[k]);
  }
  // per node: momentum, force, the angular block of I crm(v) + crm(v)^T I; then
  // subtree sums (one frame: no transforms)
  auto node_force = [&](int k, double* f) {
    double Ia[6], Pk[6], vP[6];
    mv(Iw[k], &aw[6 * k], Ia);
    mv(Iw[k], &vw[6 * k], Pk);
    cross_force(&vw[6 * k], Pk, vP);
    for (int i = 0; i < 6; ++i) f[i] = Ia[i] + vP[i];
  };
  for (int k = 1; k < nn; ++k) {
    const Mat6& I = Iw[k];
    const double* vk = &vw[6 * k];
    mv(I, vk, &Pm[6 * k]);
    node_force(k, &G[6 * k]);
    IC[k] = I;
    const double h[3] = {I.m[2][4], I.m[0][5], I.m[1][3]};
    const double* w = vk;
    const double* nu = vk + 3;
    const double hn = h[0] * nu[0] + h[1] * nu[1] + h[2] * nu[2];
    double Ix[3][3], W[3][3];
    skew(w, W);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        Ix[i][j] = I.m[i][0] * W[0][j] + I.m[i][1] * W[1][j] + I.m[i][2] * W[2][j];
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        A[9 * k + 3 * i + j] = Ix[i][j] + Ix[j][i] + nu[i] * h[j] + h[i] * nu[j] - 2 * hn * (i == j);
  }
  for (int k = nn - 1; k >= 1; --k) {
    const int pk = t.parent[k];
    if (pk == 0) continue;
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) IC[pk].m[i][j] += IC[k].m[i][j];
    for (int i = 0; i < 9; ++i) A[9 * pk + i] += A[9 * k + i];
    for (int i = 0; i < 6; ++i) {
      Pm[6 * pk + i] += Pm[6 * k + i];
      G[6 * pk + i] += G[6 * k + i];
    }
  }
  // H (y_i . S_j on the ancestors), its Cholesky factor, qdd = H^-1 (tau - S . G)
  for (int k = 1; k < nn; ++k) mv(IC[k], &Sw[6 * k], &y[6 * k]);
  for (int i = 0; i < nv; ++i)
    for (int j = 0; j < nv; ++j) {
      const int e = i * nv + j;
      H[e] = subv[e] ? dot6(&y[6 * (i + 1)], &Sw[6 * (j + 1)])
                     : (ancv[e] ? dot6(&y[6 * (j + 1)], &Sw[6 * (i + 1)]) : 0.0);
    }
  for (int i = 0; i < nv; ++i) H[i * nv + i] += arm[i];
  double* L = H.data();  // in place, lower triangle
  if (!Solve) {
    double* Hout = M;
    for (int i = 0; i < nv * nv; ++i) Hout[i] = H[i];
    for (int i = 0; i < nv; ++i) qdd[i] = tau[i];  // x is qdd
  }
  for (int j = 0; Solve && j < nv; ++j) {
    double d = L[j * nv + j];
    for (int l = 0; l < j; ++l) d -= L[j * nv + l] * L[j * nv + l];
    d = std::sqrt(d);
    L[j * nv + j] = d;
    for (int i = j + 1; i < nv; ++i) {
      double x = L[i * nv + j];
      for (int l = 0; l < j; ++l) x -= L[i * nv + l] * L[j * nv + l];
      L[i * nv + j] = x / d;
    }
  }
  for (int i = 0; Solve && i < nv; ++i) qdd[i] = tau[i] - dot6(&Sw[6 * (i + 1)], &G[6 * (i + 1)]);
  for (int i = 0; Solve && i < nv; ++i) {  // L z = b, L^T x = z
    double x = qdd[i];
    for (int l = 0; l < i; ++l) x -= L[i * nv + l] * qdd[l];
    qdd[i] = x / L[i * nv + i];
  }
  for (int i = nv - 1; Solve && i >= 0; --i) {
    double x = qdd[i];
    for (int l = i + 1; l < nv; ++l) x -= L[l * nv + i] * qdd[l];
    qdd[i] = x / L[i * nv + i];
  }
  // the accelerations qdd adds along each path, and the forces they take
  std::vector<double>& alpha = scratch<20>(6 * nn, 0.0);
  for (int k = 1; k < nn; ++k) {
    const int pk = t.parent[k];
    for (int i = 0; i < 6; ++i) {
      alpha[6 * k + i] = alpha[6 * pk + i] + Sw[6 * k + i] * qdd[k - 1];
      aw[6 * k + i] += alpha[6 * k + i];
    }
  }
  for (int k = 1; k < nn; ++k) node_force(k, &G[6 * k]);
  for (int k = nn - 1; k >= 1; --k) {
    const int pk = t.parent[k];
    if (pk == 0) continue;
    for (int i = 0; i < 6; ++i) G[6 * pk + i] += G[6 * k + i];
  }
  // BC u = [(A + P_w x) u_w; 2 P_v x u_w] of the composites at node k
  auto bc_mul = [&](int k, const double* uw, double* o) {
    const double* Ak = &A[9 * k];
    const double* Pk = &Pm[6 * k];
    double c1[3], c2[3];
    cross3(Pk, uw, c1);
    cross3(Pk + 3, uw, c2);
    for (int i = 0; i < 3; ++i) {
      o[i] = Ak[3 * i] * uw[0] + Ak[3 * i + 1] * uw[1] + Ak[3 * i + 2] * uw[2] + c1[i];
      o[3 + i] = 2 * c2[i];
    }
  };
  // per DoF: the direction vectors (w, u, c, Phi, Psi) and z
  for (int i = 0; i < nv; ++i) {
    const int k = i + 1;
    const double* S = &Sw[6 * k];
    const double* vb = &vw[6 * LAM[i]];
    const double* ab = &aw[6 * LAM[i]];
    double* w = &vecs[48 * i];
    double* u = w + 6;
    double* c = w + 12;
    double* Phi = w + 18;
    double* Psi = w + 24;
    double* z = w + 30;
    double Sab[6], uvb[6], vsum[6], tmp[6], tmp2[6];
    cross_motion(S, vb, u);
    cross_motion(S, ab, Sab);
    cross_motion(u, vb, uvb);
    for (int l = 0; l < 6; ++l) {
      w[l] = Sab[l] - uvb[l];
      vsum[l] = vw[6 * NU[i] + l] + vb[l];
    }
    cross_motion(vsum, S, c);
    const int pp = P[i] + 1;  // the node of the DoF a q-step moves
    cross_force(S, &G[6 * pp], Phi);
    mv(IC[pp], w, tmp);
    bc_mul(pp, u, tmp2);
    for (int l = 0; l < 6; ++l) Phi[l] += tmp2[l] - tmp[l];
    mv(IC[k], c, Psi);
    bc_mul(k, S, tmp2);
    for (int l = 0; l < 6; ++l) Psi[l] -= tmp2[l];
    // z = A S_w + S_w x P_w + 2 S_v x P_v (composites at k)
    const double* Ak = &A[9 * k];
    const double* Pk = &Pm[6 * k];
    double c1[3], c2[3];
    cross3(S, Pk, c1);
    cross3(S + 3, Pk + 3, c2);
    for (int l = 0; l < 3; ++l)
      z[l] = Ak[3 * l] * S[0] + Ak[3 * l + 1] * S[1] + Ak[3 * l + 2] * S[2] + c1[l] + 2 * c2[l];
  }
  // -d tau / dq, -d tau / dqd: dot products of a DoF's vectors with a direction's
  for (int i = 0; i < nv; ++i) {
    const double* yi = &y[6 * (i + 1)];
    const double* Si = &Sw[6 * (i + 1)];
    const double* zi = &vecs[48 * i + 30];
    for (int j = 0; j < nv; ++j) {
      const int e = i * nv + j;
      const double* wj = &vecs[48 * j];
      const double* uj = wj + 6;
      const double* cj = wj + 12;
      const double* Sj = &Sw[6 * (j + 1)];
      double x = 0;
      if (subq[e])  // P_q . Q_q with P_q = [-y, z], Q_q = -[w, u_w]
        x = dot6(yi, wj) - (zi[0] * uj[0] + zi[1] * uj[1] + zi[2] * uj[2]);
      else if (ancq[e])
        x = -dot6(Si, wj + 18);
      dq[e] = x;
      x = 0;
      if (subv[e])  // P_v . Q_v with P_v = [-z, y], Q_v = -[S_w, c]
        x = (zi[0] * Sj[0] + zi[1] * Sj[1] + zi[2] * Sj[2]) - dot6(yi, cj);
      else if (ancv[e])
        x = -dot6(Si, wj + 24);
      dv[e] = x;
    }
  }
  if (!Solve) {  // tau = S . G + armature qdd; the matrices are d tau (the sign back)
    for (int i = 0; i < nv; ++i)
      out[i] = dot6(&Sw[6 * (i + 1)], &G[6 * (i + 1)]) + arm[i] * qdd[i];
    for (int i = 0; i < nv * nv; ++i) {
      Jq[i] = -dq[i];
      Jv[i] = -dv[i];
    }
    return;
  }
  for (int i = 0; i < nv; ++i) out[i] = qdd[i];
  // H^-1 = L^-T L^-1 (Linv in the upper triangle of a scratch), then the products
  double* Minv = M;
  std::vector<double>& Li = scratch<21>(nv * nv, 0.0);
  for (int j = 0; j < nv; ++j) {  // column j of L^-1
    Li[j * nv + j] = 1.0 / L[j * nv + j];
    for (int i = j + 1; i < nv; ++i) {
      double x = 0;
      for (int l = j; l < i; ++l) x -= L[i * nv + l] * Li[l * nv + j];
      Li[i * nv + j] = x / L[i * nv + i];
    }
  }
  for (int i = 0; i < nv; ++i)
    for (int j = 0; j <= i; ++j) {
      double x = 0;
      for (int l = i; l < nv; ++l) x += Li[l * nv + i] * Li[l * nv + j];
      Minv[i * nv + j] = x;
      Minv[j * nv + i] = x;
    }
  for (int i = 0; i < nv * nv; ++i) Jq[i] = Jv[i] = 0;
  for (int i = 0; i < nv; ++i)
    for (int l = 0; l < nv; ++l) {
      const double m = Minv[i * nv + l];
      const double* dql = &dq[l * nv];
      const double* dvl = &dv[l * nv];
      for (int j = 0; j < nv; ++j) {
        Jq[i * nv + j] += m * dql[j];
        Jv[i * nv + j] += m * dvl[j];
      }
    }
}

template <bool Solve>
ffi::Error StateDerivatives(MODEL_ARGS, ffi::Buffer<ffi::S32> p_b, ffi::Buffer<ffi::S32> nu_b,
                            ffi::Buffer<ffi::S32> lam_b, ffi::Buffer<ffi::S32> subq_b,
                            ffi::Buffer<ffi::S32> ancq_b, ffi::Buffer<ffi::S32> subv_b,
                            ffi::Buffer<ffi::S32> ancv_b, ffi::Buffer<ffi::F64> q_b,
                            ffi::Buffer<ffi::F64> qd_b, ffi::Buffer<ffi::F64> x_b,
                            ffi::ResultBuffer<ffi::F64> y_b, ffi::ResultBuffer<ffi::F64> Jq_b,
                            ffi::ResultBuffer<ffi::F64> Jv_b, ffi::ResultBuffer<ffi::F64> M_b) {
  Tree t = MODEL_TREE;
  const DerivativeTables d{p_b.typed_data(),    nu_b.typed_data(),   lam_b.typed_data(),
                           subq_b.typed_data(), ancq_b.typed_data(), subv_b.typed_data(),
                           ancv_b.typed_data()};
  const int64_t B = batch_of(q_b), nq = q_b.element_count() / B, nv = t.nn - 1;
  for (int64_t s = 0; s < B; ++s)
    state_derivatives_one<Solve>(
        t, d, t.arm, t.g, q_b.typed_data() + s * nq,
        qd_b.typed_data() + s * nv, x_b.typed_data() + s * nv, y_b->typed_data() + s * nv,
        Jq_b->typed_data() + s * nv * nv, Jv_b->typed_data() + s * nv * nv,
        M_b->typed_data() + s * nv * nv);
  return ffi::Error::Success();
}

}  // namespace

// The model's buffers in a binding (the order of MODEL_ARGS).
#define BIND_MODEL(b) b.Arg<ffi::Buffer<ffi::S32>>().Arg<ffi::Buffer<ffi::F64>>()

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdAba, Aba,
                              BIND_MODEL(ffi::Ffi::Bind())
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // tau
                                  .Ret<ffi::Buffer<ffi::F64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdAbaAux, AbaAux,
                              BIND_MODEL(ffi::Ffi::Bind())
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // tau
                                  .Ret<ffi::Buffer<ffi::F64>>()  // qdd
                                  .Ret<ffi::Buffer<ffi::F64>>());  // aux

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdRnea, Rnea,
                              BIND_MODEL(ffi::Ffi::Bind())
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qdd
                                  .Ret<ffi::Buffer<ffi::F64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdCrba, Crba,
                              BIND_MODEL(ffi::Ffi::Bind())
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Ret<ffi::Buffer<ffi::F64>>());

// extra: the arguments after lam (FdVjp's aux)
#define BIND_VJP(b, extra)                                                                \
  BIND_MODEL(b)                                                                           \
      .Arg<ffi::Buffer<ffi::F64>>()    /* q */                                            \
      .Arg<ffi::Buffer<ffi::F64>>()    /* qd */                                           \
      .Arg<ffi::Buffer<ffi::F64>>()    /* qdd */                                          \
      .Arg<ffi::Buffer<ffi::F64>>()    /* lam */                                          \
      extra                                                                               \
      .Ret<ffi::Buffer<ffi::F64>>()    /* Xtree_E */                                      \
      .Ret<ffi::Buffer<ffi::F64>>()    /* Xtree_r */                                      \
      .Ret<ffi::Buffer<ffi::F64>>()    /* inertia */                                      \
      .Ret<ffi::Buffer<ffi::F64>>()    /* axes */                                         \
      .Ret<ffi::Buffer<ffi::F64>>()    /* armature */                                     \
      .Ret<ffi::Buffer<ffi::F64>>()    /* gravity */                                      \
      .Ret<ffi::Buffer<ffi::F64>>()    /* q */                                            \
      .Ret<ffi::Buffer<ffi::F64>>()    /* qd */                                           \
      .Ret<ffi::Buffer<ffi::F64>>()    /* qdd | tau */                                    \
      .RemainingRets()                 /* zeros */

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdRneaVjp, RneaVjp, BIND_VJP(ffi::Ffi::Bind(), ));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdFdVjp, FdVjp,
                              BIND_VJP(ffi::Ffi::Bind(), .Arg<ffi::Buffer<ffi::F64>>() /* aux */));

#define BIND_DERIVATIVES(b)                                                               \
  BIND_MODEL(b)                                                                           \
      .Arg<ffi::Buffer<ffi::S32>>()    /* p */                                            \
      .Arg<ffi::Buffer<ffi::S32>>()    /* nu_node */                                      \
      .Arg<ffi::Buffer<ffi::S32>>()    /* lam_p_node */                                   \
      .Arg<ffi::Buffer<ffi::S32>>()    /* sub_q */                                        \
      .Arg<ffi::Buffer<ffi::S32>>()    /* anc_q */                                        \
      .Arg<ffi::Buffer<ffi::S32>>()    /* sub_v */                                        \
      .Arg<ffi::Buffer<ffi::S32>>()    /* anc_v */                                        \
      .Arg<ffi::Buffer<ffi::F64>>()    /* q */                                            \
      .Arg<ffi::Buffer<ffi::F64>>()    /* qd */                                           \
      .Arg<ffi::Buffer<ffi::F64>>()    /* tau | qdd */                                    \
      .Ret<ffi::Buffer<ffi::F64>>()    /* qdd | tau */                                    \
      .Ret<ffi::Buffer<ffi::F64>>()    /* d / dq */                                       \
      .Ret<ffi::Buffer<ffi::F64>>()    /* d / dqd */                                      \
      .Ret<ffi::Buffer<ffi::F64>>()    /* H^-1 | H */

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdFdDerivatives, StateDerivatives<true>,
                              BIND_DERIVATIVES(ffi::Ffi::Bind()));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdIdDerivatives, StateDerivatives<false>,
                              BIND_DERIVATIVES(ffi::Ffi::Bind()));

// ---------------------------------------------------------------- the hard contact step's
// dynamics terms for a batch (jaxrbd.ground's hard model, `ffi_contact.hard_terms`)

namespace {

// The stride between the samples of an operand of a batch of B samples of `size` numbers
// each: `size` where it holds all B, 0 where it holds one (shared, read in place), -1
// otherwise.
int64_t batch_stride(size_t count, int64_t size, int64_t B) {
  if (static_cast<int64_t>(count) == size * B) return size;
  if (static_cast<int64_t>(count) == size) return 0;
  return -1;
}

// H = L^T L in place (Featherstone 2008, Table 6.3, the LTL factorization): with the
// DoFs in topological order, L(k, i) != 0 only for i = k or i an ancestor of k
// (lambda = the node parents, 0 the world), so the factor fills in no entry that H's
// tree sparsity leaves zero and costs O(nv d^2) for a tree of depth d. Only the
// entries along ancestor chains (those the CRBA writes) are read. A pivot <= 0 gives
// NaN, as a failed dense Cholesky does.
void ltl_factor(int nv, const int32_t* lambda, double* H) {
  for (int k = nv; k >= 1; --k) {
    double* Hk = H + (k - 1) * nv;
    const double d = Hk[k - 1] > 0 ? std::sqrt(Hk[k - 1]) : NAN;
    Hk[k - 1] = d;
    for (int i = lambda[k]; i != 0; i = lambda[i]) Hk[i - 1] /= d;
    for (int i = lambda[k]; i != 0; i = lambda[i])
      for (int j = i; j != 0; j = lambda[j]) H[(i - 1) * nv + (j - 1)] -= Hk[i - 1] * Hk[j - 1];
  }
}

// x = L^-T x in place (L^T x = b, the descendants first)
void ltl_solve_t(int nv, const int32_t* lambda, const double* L, double* x) {
  for (int j = nv; j >= 1; --j) {
    const double* Lj = L + (j - 1) * nv;
    const double xj = x[j - 1] / Lj[j - 1];
    x[j - 1] = xj;
    for (int i = lambda[j]; i != 0; i = lambda[i]) x[i - 1] -= Lj[i - 1] * xj;
  }
}

// x = L^-1 x in place (L x = b, the ancestors first)
void ltl_solve(int nv, const int32_t* lambda, const double* L, double* x) {
  for (int i = 1; i <= nv; ++i) {
    const double* Li = L + (i - 1) * nv;
    double s = x[i - 1];
    for (int j = lambda[i]; j != 0; j = lambda[j]) s -= Li[j - 1] * x[j - 1];
    x[i - 1] = s / Li[i - 1];
  }
}

// X = L^-T X in place for X (nv, m) row-major: `ltl_solve_t` on every column at once,
// a row of m at a time, so that the inner loop runs along contiguous memory and
// vectorizes; each column takes the operations of `ltl_solve_t` in their order.
void ltl_solve_t_rows(int nv, int m, const int32_t* lambda, const double* L, double* X) {
  for (int j = nv; j >= 1; --j) {
    const double* Lj = L + (j - 1) * nv;
    double* xj = X + (j - 1) * m;
    const double d = Lj[j - 1];
    for (int r = 0; r < m; ++r) xj[r] /= d;
    for (int i = lambda[j]; i != 0; i = lambda[i]) {
      const double l = Lj[i - 1];
      double* xi = X + (i - 1) * m;
      for (int r = 0; r < m; ++r) xi[r] -= l * xj[r];
    }
  }
}

// X = L^-1 X in place for X (nv, m) row-major (`ltl_solve` on every column, by rows)
void ltl_solve_rows(int nv, int m, const int32_t* lambda, const double* L, double* X) {
  for (int i = 1; i <= nv; ++i) {
    const double* Li = L + (i - 1) * nv;
    double* xi = X + (i - 1) * m;
    for (int j = lambda[i]; j != 0; j = lambda[j]) {
      const double l = Li[j - 1];
      const double* xj = X + (j - 1) * m;
      for (int r = 0; r < m; ++r) xi[r] -= l * xj[r];
    }
    const double d = Li[i - 1];
    for (int r = 0; r < m; ++r) xi[r] /= d;
  }
}

// Per sample, for the hard contact step (jaxrbd.ground._hard_terms): the bias forces
// C = RNEA(q, qd, 0), the mass matrix H (CRBA, with the armature), H = L^T L, and
//   A = G H^-1 G^T + diag(R), R = reg (d + mean(d) 1e-3), d = diag(G H^-1 G^T)
//   W = H^-1 G^T (nv, m),  v = qd + dt H^-1 (tau - C).
// G (m, nv) comes from XLA. Operands of one sample are shared by the batch.
ffi::Error HardTermsBatch(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                          ffi::Buffer<ffi::F64> tau_b, ffi::Buffer<ffi::F64> G_b,
                          ffi::Buffer<ffi::F64> dt_b, ffi::Buffer<ffi::F64> reg_b,
                          ffi::ResultBuffer<ffi::F64> A_b, ffi::ResultBuffer<ffi::F64> W_b,
                          ffi::ResultBuffer<ffi::F64> v_b, int64_t nq, int64_t m) {
  Tree t = MODEL_TREE_COMPACT;  // rnea_one and crba_one read the compact rows
  const int nn = t.nn, nv = nn - 1;
  const int64_t B = static_cast<int64_t>(v_b->element_count()) / std::max(nv, 1);
  const int64_t sq = batch_stride(q_b.element_count(), nq, B);
  const int64_t sqd = batch_stride(qd_b.element_count(), nv, B);
  const int64_t stau = batch_stride(tau_b.element_count(), nv, B);
  const int64_t sG = batch_stride(G_b.element_count(), m * nv, B);
  if (sq < 0 || sqd < 0 || stau < 0 || sG < 0 || dt_b.element_count() != 1 ||
      reg_b.element_count() != 1)
    return ffi::Error::InvalidArgument(
        "jaxrbd_hard_terms_batch: q (B, nq), qd and tau (B, nv), G (B, m, nv), each of one "
        "sample or B; dt and reg scalars");
  const double dt = *dt_b.typed_data(), reg = *reg_b.typed_data();
  const double* arm = t.arm;
  const double* g = t.g;
  std::vector<double> zero(nv, 0.0), C(nv), H(nv * nv), Z(nv * m), d(m);
  for (int64_t b = 0; b < B; ++b) {
    const double *q = q_b.typed_data() + b * sq, *qd = qd_b.typed_data() + b * sqd;
    const double *tau = tau_b.typed_data() + b * stau, *G = G_b.typed_data() + b * sG;
    double *A = A_b->typed_data() + b * m * m, *W = W_b->typed_data() + b * nv * m;
    double* v = v_b->typed_data() + b * nv;
    rnea_one(t, arm, g, q, qd, zero.data(), C.data());
    crba_one(t, arm, q, H.data());
    for (int i = 0; i < nv; ++i) v[i] = tau[i] - C[i];  // tau - C, solved for below
    ltl_factor(nv, t.parent, H.data());
    // v = qd + dt H^-1 (tau - C)
    ltl_solve_t(nv, t.parent, H.data(), v);
    ltl_solve(nv, t.parent, H.data(), v);
    for (int i = 0; i < nv; ++i) v[i] = qd[i] + dt * v[i];
    // Z = L^-T G^T, A = Z^T Z, W = L^-1 Z
    for (int i = 0; i < nv; ++i)
      for (int r = 0; r < m; ++r) Z[i * m + r] = G[r * nv + i];
    ltl_solve_t_rows(nv, m, t.parent, H.data(), Z.data());
    // the lower half of A by rows of Z (each entry sums over i ascending; the inner
    // loop vectorizes), then mirrored
    std::fill(A, A + m * m, 0.0);
    for (int i = 0; i < nv; ++i) {
      const double* zi = Z.data() + i * m;
      for (int r = 0; r < m; ++r) {
        const double zr = zi[r];
        if (zr == 0) continue;  // Z keeps G's sparsity: a point moves with its ancestors only
        double* Ar = A + r * m;
        for (int s = 0; s <= r; ++s) Ar[s] += zr * zi[s];
      }
    }
    for (int r = 0; r < m; ++r)
      for (int s = 0; s < r; ++s) A[s * m + r] = A[r * m + s];
    double mean = 0;
    for (int r = 0; r < m; ++r) mean += (d[r] = A[r * m + r]);
    mean /= std::max<int64_t>(m, 1);
    for (int r = 0; r < m; ++r) A[r * m + r] += reg * (d[r] + mean * 1e-3);
    ltl_solve_rows(nv, m, t.parent, H.data(), Z.data());
    std::copy(Z.begin(), Z.end(), W);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdHardTermsBatch, HardTermsBatch,
                              BIND_MODEL(ffi::Ffi::Bind())
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // tau
                                  .Arg<ffi::Buffer<ffi::F64>>()  // G
                                  .Arg<ffi::Buffer<ffi::F64>>()  // dt
                                  .Arg<ffi::Buffer<ffi::F64>>()  // reg
                                  .Ret<ffi::Buffer<ffi::F64>>()  // A
                                  .Ret<ffi::Buffer<ffi::F64>>()  // W
                                  .Ret<ffi::Buffer<ffi::F64>>()  // v
                                  .Attr<int64_t>("nq")
                                  .Attr<int64_t>("m"));
