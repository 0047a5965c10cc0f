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
#include <cmath>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// A per-thread buffer of n copies of x, reused from call to call: a call allocates
// nothing once its thread has run one of the same size (XLA may run kernels on several
// threads at once; each has its own buffers).
template <int Slot, class T>
std::vector<T>& scratch(size_t n, const T& x) {
  thread_local std::vector<T> buffer;
  buffer.assign(n, x);
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
void apply(const Xf& X, const double* m, double* o) {
  const double* r = X.r;
  const double t[3] = {m[3] - (r[1] * m[2] - r[2] * m[1]), m[4] - (r[2] * m[0] - r[0] * m[2]),
                       m[5] - (r[0] * m[1] - r[1] * m[0])};
  for (int i = 0; i < 3; ++i) {
    o[i] = X.E[i][0] * m[0] + X.E[i][1] * m[1] + X.E[i][2] * m[2];
    o[i + 3] = X.E[i][0] * t[0] + X.E[i][1] * t[1] + X.E[i][2] * t[2];
  }
}

// X^T f = [E^T n + r x E^T l; E^T l] for a force f = [n; l].
void apply_T(const Xf& X, const double* f, double* o) {
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

void skew(const double* a, double o[3][3]) {
  o[0][0] = 0; o[0][1] = -a[2]; o[0][2] = a[1];
  o[1][0] = a[2]; o[1][1] = 0; o[1][2] = -a[0];
  o[2][0] = -a[1]; o[2][1] = a[0]; o[2][2] = 0;
}

// Rotation (child -> parent) of the unit quaternion along q/|q|, (w, x, y, z); NaN for 0.
void quat_R(const double* q, double R[3][3]) {
  const double n2 = q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3];
  const double n = n2 > 0 ? std::sqrt(n2) : NAN;
  const double w = q[0] / n, x = q[1] / n, y = q[2] / n, z = q[3] / n;
  R[0][0] = 1 - 2 * (y * y + z * z); R[0][1] = 2 * (x * y - w * z); R[0][2] = 2 * (x * z + w * y);
  R[1][0] = 2 * (x * y + w * z); R[1][1] = 1 - 2 * (x * x + z * z); R[1][2] = 2 * (y * z - w * x);
  R[2][0] = 2 * (x * z - w * y); R[2][1] = 2 * (y * z + w * x); R[2][2] = 1 - 2 * (x * x + y * y);
}

// The joint transform X_J = X(E_J, r_J) of node k (E_J = R^T: parent -> child).
void joint_transform(int32_t kind, const double* S, const double* q, double E[3][3],
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

void mv(const Mat6& A, const double* x, double* y) {
  for (int i = 0; i < 6; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += A.m[i][j] * x[j];
    y[i] = s;
  }
}

void cross_motion(const double* v, const double* m, double* o) {
  o[0] = v[1] * m[2] - v[2] * m[1];
  o[1] = v[2] * m[0] - v[0] * m[2];
  o[2] = v[0] * m[1] - v[1] * m[0];
  o[3] = v[1] * m[5] - v[2] * m[4] + v[4] * m[2] - v[5] * m[1];
  o[4] = v[2] * m[3] - v[0] * m[5] + v[5] * m[0] - v[3] * m[2];
  o[5] = v[0] * m[4] - v[1] * m[3] + v[3] * m[1] - v[4] * m[0];
}

void cross_force(const double* v, const double* f, double* o) {
  o[0] = v[1] * f[2] - v[2] * f[1] + v[4] * f[5] - v[5] * f[4];
  o[1] = v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5];
  o[2] = v[0] * f[1] - v[1] * f[0] + v[3] * f[4] - v[4] * f[3];
  o[3] = v[1] * f[5] - v[2] * f[4];
  o[4] = v[2] * f[3] - v[0] * f[5];
  o[5] = v[0] * f[4] - v[1] * f[3];
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
  int nn;
  const int32_t *kind, *parent, *qi, *bias_to, *first_body;
  const double *E, *r, *axes;
  Mat6* I;  // per-thread scratch (make_tree)
};

Tree make_tree(ffi::Buffer<ffi::S32> kind, ffi::Buffer<ffi::S32> parent,
               ffi::Buffer<ffi::S32> qi, ffi::Buffer<ffi::S32> bias_to,
               ffi::Buffer<ffi::S32> first_body, ffi::Buffer<ffi::S32> body_node,
               ffi::Buffer<ffi::S32> fixed, ffi::Buffer<ffi::F64> E, ffi::Buffer<ffi::F64> r,
               ffi::Buffer<ffi::F64> inertia, ffi::Buffer<ffi::F64> axes) {
  Tree t;
  t.nn = static_cast<int>(parent.element_count());
  t.kind = kind.typed_data(); t.parent = parent.typed_data(); t.qi = qi.typed_data();
  t.bias_to = bias_to.typed_data(); t.first_body = first_body.typed_data();
  t.E = E.typed_data(); t.r = r.typed_data(); t.axes = axes.typed_data();
  // each node's rigid-body inertia in compact form (m, h = m c, I about the origin),
  // summed over its bodies, a welded body's moved into the node's frame first
  std::vector<double>& acc = scratch<0>(10 * t.nn, 0.0);
  const int nb = static_cast<int>(body_node.element_count());
  const int32_t* bn = body_node.typed_data();
  const int32_t* fx = fixed.typed_data();
  for (int b = 1; b < nb; ++b) {
    if (bn[b] == 0) continue;  // welded to the world: never moves
    const double* I = inertia.typed_data() + 10 * b;
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
    double* a = &acc[10 * bn[b]];
    a[0] += m; a[1] += h[0]; a[2] += h[1]; a[3] += h[2];
    a[4] += Io[0][0]; a[5] += Io[0][1]; a[6] += Io[1][1];
    a[7] += Io[0][2]; a[8] += Io[1][2]; a[9] += Io[2][2];
  }
  t.I = scratch<1>(t.nn, Mat6{}).data();
  for (int k = 0; k < t.nn; ++k) inertia6(&acc[10 * k], t.I[k]);
  return t;
}

// Xup = X_J Xtree of node k.
void node_transform(const Tree& t, int k, const double* q, Xf& X) {
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

// The model's buffers, the same for every kernel (ffi.py: _buffers).
#define MODEL_ARGS                                                                          \
  ffi::Buffer<ffi::S32> kind, ffi::Buffer<ffi::S32> parent, ffi::Buffer<ffi::S32> qi,      \
      ffi::Buffer<ffi::S32> bias_to, ffi::Buffer<ffi::S32> first_body,                     \
      ffi::Buffer<ffi::S32> body_node, ffi::Buffer<ffi::S32> fixed,                        \
      ffi::Buffer<ffi::F64> Xtree_E, ffi::Buffer<ffi::F64> Xtree_r,                        \
      ffi::Buffer<ffi::F64> inertia, ffi::Buffer<ffi::F64> axes,                           \
      ffi::Buffer<ffi::F64> armature_b, ffi::Buffer<ffi::F64> gravity_b
#define MODEL_TREE \
  make_tree(kind, parent, qi, bias_to, first_body, body_node, fixed, Xtree_E, Xtree_r, inertia, axes)

// Velocities v, the joint velocities vJc each joint's last node collects, and Xup.
void velocities(const Tree& t, const double* q, const double* qd, std::vector<Xf>& Xup,
                std::vector<double>& v, std::vector<double>& vJc) {
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

// Forward dynamics, Featherstone (2008) Table 7.1, with the armature on D.
ffi::Error Aba(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
               ffi::Buffer<ffi::F64> tau_b, ffi::ResultBuffer<ffi::F64> qdd_b) {
  Tree t = MODEL_TREE;
  const int nn = t.nn;
  const double* tau = tau_b.typed_data();
  const double* arm = armature_b.typed_data();
  const double* g = gravity_b.typed_data();
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
  velocities(t, q_b.typed_data(), qd_b.typed_data(), Xup, v, vJc);
  for (int k = 1; k < nn; ++k) {
    double Iv[6];
    mv(IA[k], &v[6 * k], Iv);
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
    double pa[6], Iac[6], f[6];
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) Ia.m[i][j] = IA[k].m[i][j] - Uk[i] * Uk[j] / d;
    mv(Ia, &c[6 * k], Iac);
    for (int i = 0; i < 6; ++i) pa[i] = pA[6 * k + i] + Iac[i] + Uk[i] * u[k] / d;
    add_congruence(Xup[k], Ia, IA[p]);
    apply_T(Xup[k], pa, f);
    for (int i = 0; i < 6; ++i) pA[6 * p + i] += f[i];
  }
  // the world accelerates at -g: gravity without a force on every body
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  double* qdd = qdd_b->typed_data();
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    double ap[6], Ua = 0;
    apply(Xup[k], &a[6 * t.parent[k]], ap);
    for (int i = 0; i < 6; ++i) {
      ap[i] += c[6 * k + i];
      Ua += U[6 * k + i] * ap[i];
    }
    const double x = (u[k] - Ua) / D[k];
    qdd[k - 1] = x;
    for (int i = 0; i < 6; ++i) a[6 * k + i] = ap[i] + S[i] * x;
  }
  return ffi::Error::Success();
}

// Inverse dynamics, Featherstone (2008) Table 5.1, with the armature's torque arm qdd.
ffi::Error Rnea(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                ffi::Buffer<ffi::F64> qdd_b, ffi::ResultBuffer<ffi::F64> tau_b) {
  Tree t = MODEL_TREE;
  const int nn = t.nn;
  const double* qdd = qdd_b.typed_data();
  const double* arm = armature_b.typed_data();
  const double* g = gravity_b.typed_data();
  std::vector<Xf>& Xup = scratch<2>(nn, Xf{});
  std::vector<double>& v = scratch<3>(6 * nn, 0.0);
  std::vector<double>& vJc = scratch<4>(6 * nn, 0.0);
  std::vector<double>& a = scratch<10>(6 * nn, 0.0);
  std::vector<double>& f = scratch<6>(6 * nn, 0.0);
  velocities(t, q_b.typed_data(), qd_b.typed_data(), Xup, v, vJc);
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    double ap[6], c[6], Iv[6], Ia[6], vIv[6];
    apply(Xup[k], &a[6 * t.parent[k]], ap);
    cross_motion(&v[6 * k], &vJc[6 * k], c);
    for (int i = 0; i < 6; ++i) a[6 * k + i] = ap[i] + S[i] * qdd[k - 1] + c[i];
    mv(t.I[k], &a[6 * k], Ia);
    mv(t.I[k], &v[6 * k], Iv);
    cross_force(&v[6 * k], Iv, vIv);
    for (int i = 0; i < 6; ++i) f[6 * k + i] = Ia[i] + vIv[i];
  }
  double* tau = tau_b->typed_data();
  for (int k = nn - 1; k >= 1; --k) {
    const double* S = t.axes + 6 * (k - 1);
    double x = arm[k - 1] * qdd[k - 1];
    for (int i = 0; i < 6; ++i) x += S[i] * f[6 * k + i];
    tau[k - 1] = x;
    if (t.parent[k] == 0) continue;
    double fp[6];
    apply_T(Xup[k], &f[6 * k], fp);
    for (int i = 0; i < 6; ++i) f[6 * t.parent[k] + i] += fp[i];
  }
  return ffi::Error::Success();
}

// The joint-space inertia matrix H + diag(armature), Featherstone (2008) Table 6.2.
ffi::Error Crba(MODEL_ARGS, ffi::Buffer<ffi::F64> q_b, ffi::ResultBuffer<ffi::F64> H_b) {
  Tree t = MODEL_TREE;
  const int nn = t.nn, nv = nn - 1;
  const double* arm = armature_b.typed_data();
  std::vector<Xf>& Xup = scratch<2>(nn, Xf{});
  Mat6* Ic = t.I;  // composite inertias start as the rigid ones
  for (int k = 1; k < nn; ++k) node_transform(t, k, q_b.typed_data(), Xup[k]);
  for (int k = nn - 1; k >= 1; --k)
    if (t.parent[k] != 0) add_congruence(Xup[k], Ic[k], Ic[t.parent[k]]);
  double* H = H_b->typed_data();
  for (int i = 0; i < nv * nv; ++i) H[i] = 0;
  for (int k = 1; k < nn; ++k) {
    const double* S = t.axes + 6 * (k - 1);
    double F[6], Fp[6];
    mv(Ic[k], S, F);
    double h = arm[k - 1];
    for (int i = 0; i < 6; ++i) h += S[i] * F[i];
    H[(k - 1) * nv + (k - 1)] = h;
    for (int j = k; t.parent[j] != 0; j = t.parent[j]) {
      apply_T(Xup[j], F, Fp);
      for (int i = 0; i < 6; ++i) F[i] = Fp[i];
      const int pj = t.parent[j];
      double x = 0;
      for (int i = 0; i < 6; ++i) x += t.axes[6 * (pj - 1) + i] * F[i];
      H[(k - 1) * nv + (pj - 1)] = x;
      H[(pj - 1) * nv + (k - 1)] = x;
    }
  }
  return ffi::Error::Success();
}

}  // namespace

// The model's buffers in a binding (the order of MODEL_ARGS).
#define BIND_MODEL(b)                                                                     \
  b.Arg<ffi::Buffer<ffi::S32>>()       /* kind */                                         \
      .Arg<ffi::Buffer<ffi::S32>>()    /* parent */                                       \
      .Arg<ffi::Buffer<ffi::S32>>()    /* qi */                                           \
      .Arg<ffi::Buffer<ffi::S32>>()    /* bias_to */                                      \
      .Arg<ffi::Buffer<ffi::S32>>()    /* first_body */                                   \
      .Arg<ffi::Buffer<ffi::S32>>()    /* body_node */                                    \
      .Arg<ffi::Buffer<ffi::S32>>()    /* fixed */                                        \
      .Arg<ffi::Buffer<ffi::F64>>()    /* Xtree_E */                                      \
      .Arg<ffi::Buffer<ffi::F64>>()    /* Xtree_r */                                      \
      .Arg<ffi::Buffer<ffi::F64>>()    /* inertia */                                      \
      .Arg<ffi::Buffer<ffi::F64>>()    /* axes */                                         \
      .Arg<ffi::Buffer<ffi::F64>>()    /* armature */                                     \
      .Arg<ffi::Buffer<ffi::F64>>()    /* gravity */

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdAba, Aba,
                              BIND_MODEL(ffi::Ffi::Bind())
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // tau
                                  .Ret<ffi::Buffer<ffi::F64>>());

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
