// jaxrbd's native CPU kernels: one state's recursion as a single XLA FFI call.
//
// The model arrives as jaxrbd's one-DoF nodes (RBDL's emulation of multi-DoF joints): node
// k >= 1 has parent node parent[k] (0 is the world), a joint kind kind[k], the index
// qi[k] of its first coordinate, the node bias_to[k] whose joint velocity it adds to, a
// tree placement X(E, r), a rigid-body inertia [m, m c, Ixx, Ixy, Iyy, Ixz, Iyz, Izz] about
// its origin and a motion-subspace column S = [w; v]. Spatial vectors are [angular; linear]
// (Featherstone 2008). These kernels mirror jaxrbd._core.jcalc and jaxrbd._aba; the tests
// hold them to the XLA programs.
#include <cmath>
#include <cstdint>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Joint kinds of a node (jaxrbd._core.ffi.NODE_KINDS).
enum Kind : int32_t { kWorld = 0, kScrew = 1, kFree = 2, kSpherical = 3, kInner = 4, kTranslation = 5 };

struct Mat6 {
  double m[6][6];
};

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

// X(E, r) = [E 0; -E r^ E].
void plucker(const double E[3][3], const double* r, Mat6& X) {
  double rx[3][3];
  skew(r, rx);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int l = 0; l < 3; ++l) s += E[i][l] * rx[l][j];
      X.m[i][j] = E[i][j]; X.m[i][j + 3] = 0; X.m[i + 3][j] = -s; X.m[i + 3][j + 3] = E[i][j];
    }
}

void mv(const Mat6& A, const double* x, double* y) {
  for (int i = 0; i < 6; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += A.m[i][j] * x[j];
    y[i] = s;
  }
}

void mtv(const Mat6& A, const double* x, double* y) {
  for (int i = 0; i < 6; ++i) {
    double s = 0;
    for (int j = 0; j < 6; ++j) s += A.m[j][i] * x[j];
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

// Xup = X_J Xtree of node k, from the model buffers.
void node_transform(int k, const int32_t* kind, const int32_t* qi, const double* Et,
                    const double* rt, const double* axes, const double* q, Mat6& X) {
  double EJ[3][3], rJ[3], E[3][3], r[3];
  joint_transform(kind[k], axes + 6 * (k - 1), q + qi[k], EJ, rJ);
  // X(EJ, rJ) X(E2, r2) = X(EJ E2, r2 + E2^T rJ)
  const double* E2 = Et + 9 * k;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j)
      E[i][j] = EJ[i][0] * E2[j] + EJ[i][1] * E2[3 + j] + EJ[i][2] * E2[6 + j];
    r[i] = rt[3 * k + i] + E2[i] * rJ[0] + E2[3 + i] * rJ[1] + E2[6 + i] * rJ[2];
  }
  plucker(E, r, X);
}

// Forward dynamics, Featherstone (2008) Table 7.1, with the armature on D.
ffi::Error Aba(ffi::Buffer<ffi::S32> kind_b, ffi::Buffer<ffi::S32> parent_b,
               ffi::Buffer<ffi::S32> qi_b, ffi::Buffer<ffi::S32> bias_b,
               ffi::Buffer<ffi::F64> Etree, ffi::Buffer<ffi::F64> rtree,
               ffi::Buffer<ffi::F64> inertia, ffi::Buffer<ffi::F64> axes_b,
               ffi::Buffer<ffi::F64> armature, ffi::Buffer<ffi::F64> gravity,
               ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b, ffi::Buffer<ffi::F64> tau_b,
               ffi::ResultBuffer<ffi::F64> qdd_b) {
  const int nn = static_cast<int>(parent_b.element_count());
  const int32_t* kind = kind_b.typed_data();
  const int32_t* parent = parent_b.typed_data();
  const int32_t* qi = qi_b.typed_data();
  const int32_t* bias_to = bias_b.typed_data();
  const double* axes = axes_b.typed_data();
  const double* q = q_b.typed_data();
  const double* qd = qd_b.typed_data();
  const double* tau = tau_b.typed_data();
  const double* arm = armature.typed_data();
  const double* g = gravity.typed_data();
  std::vector<Mat6> Xup(nn), IA(nn);
  std::vector<double> v(6 * nn, 0.0), vJc(6 * nn, 0.0), c(6 * nn, 0.0), pA(6 * nn, 0.0),
      U(6 * nn, 0.0), D(nn, 1.0), u(nn, 0.0), a(6 * nn, 0.0);
  for (int k = 1; k < nn; ++k) {
    const double* S = axes + 6 * (k - 1);
    node_transform(k, kind, qi, Etree.typed_data(), rtree.typed_data(), axes, q, Xup[k]);
    double vp[6];
    mv(Xup[k], &v[6 * parent[k]], vp);
    for (int i = 0; i < 6; ++i) {
      const double vJ = S[i] * qd[k - 1];
      v[6 * k + i] = vp[i] + vJ;
      vJc[6 * bias_to[k] + i] += vJ;
    }
    inertia6(inertia.typed_data() + 10 * k, IA[k]);
    double Iv[6];
    mv(IA[k], &v[6 * k], Iv);
    cross_force(&v[6 * k], Iv, &pA[6 * k]);
  }
  // a joint's velocity is complete once its last node is reached: the bias terms after
  for (int k = 1; k < nn; ++k) cross_motion(&v[6 * k], &vJc[6 * k], &c[6 * k]);
  for (int k = nn - 1; k >= 1; --k) {
    const double* S = axes + 6 * (k - 1);
    double* Uk = &U[6 * k];
    mv(IA[k], S, Uk);
    double d = arm[k - 1], sp = 0;
    for (int i = 0; i < 6; ++i) {
      d += S[i] * Uk[i];
      sp += S[i] * pA[6 * k + i];
    }
    D[k] = d;
    u[k] = tau[k - 1] - sp;
    const int p = parent[k];
    if (p == 0) continue;  // the world's articulated inertia is never read
    Mat6 Ia, T;
    double pa[6], Iac[6], f[6];
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) Ia.m[i][j] = IA[k].m[i][j] - Uk[i] * Uk[j] / d;
    mv(Ia, &c[6 * k], Iac);
    for (int i = 0; i < 6; ++i) pa[i] = pA[6 * k + i] + Iac[i] + Uk[i] * u[k] / d;
    const Mat6& X = Xup[k];
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) {
        double s = 0;
        for (int l = 0; l < 6; ++l) s += Ia.m[i][l] * X.m[l][j];
        T.m[i][j] = s;
      }
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) {
        double s = 0;
        for (int l = 0; l < 6; ++l) s += X.m[l][i] * T.m[l][j];
        IA[p].m[i][j] += s;
      }
    mtv(X, pa, f);
    for (int i = 0; i < 6; ++i) pA[6 * p + i] += f[i];
  }
  // the world accelerates at -g: gravity without a force on every body
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  double* qdd = qdd_b->typed_data();
  for (int k = 1; k < nn; ++k) {
    const double* S = axes + 6 * (k - 1);
    double ap[6], Ua = 0;
    mv(Xup[k], &a[6 * parent[k]], ap);
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


// Xup of every node (world row unused).
void transforms(int nn, const int32_t* kind, const int32_t* qi, const double* Et,
                const double* rt, const double* axes, const double* q, std::vector<Mat6>& Xup) {
  for (int k = 1; k < nn; ++k) node_transform(k, kind, qi, Et, rt, axes, q, Xup[k]);
}

// Inverse dynamics, Featherstone (2008) Table 5.1, with the armature's torque arm qdd.
ffi::Error Rnea(ffi::Buffer<ffi::S32> kind_b, ffi::Buffer<ffi::S32> parent_b,
                ffi::Buffer<ffi::S32> qi_b, ffi::Buffer<ffi::S32> bias_b,
                ffi::Buffer<ffi::F64> Etree, ffi::Buffer<ffi::F64> rtree,
                ffi::Buffer<ffi::F64> inertia, ffi::Buffer<ffi::F64> axes_b,
                ffi::Buffer<ffi::F64> armature, ffi::Buffer<ffi::F64> gravity,
                ffi::Buffer<ffi::F64> q_b, ffi::Buffer<ffi::F64> qd_b,
                ffi::Buffer<ffi::F64> qdd_b, ffi::ResultBuffer<ffi::F64> tau_b) {
  const int nn = static_cast<int>(parent_b.element_count());
  const int32_t* parent = parent_b.typed_data();
  const int32_t* bias_to = bias_b.typed_data();
  const double* axes = axes_b.typed_data();
  const double* qd = qd_b.typed_data();
  const double* qdd = qdd_b.typed_data();
  const double* arm = armature.typed_data();
  const double* g = gravity.typed_data();
  std::vector<Mat6> Xup(nn);
  transforms(nn, kind_b.typed_data(), qi_b.typed_data(), Etree.typed_data(),
             rtree.typed_data(), axes, q_b.typed_data(), Xup);
  std::vector<double> v(6 * nn, 0.0), vJc(6 * nn, 0.0), a(6 * nn, 0.0), f(6 * nn, 0.0);
  for (int k = 1; k < nn; ++k) {
    const double* S = axes + 6 * (k - 1);
    double vp[6];
    mv(Xup[k], &v[6 * parent[k]], vp);
    for (int i = 0; i < 6; ++i) {
      const double vJ = S[i] * qd[k - 1];
      v[6 * k + i] = vp[i] + vJ;
      vJc[6 * bias_to[k] + i] += vJ;
    }
  }
  a[3] = -g[0]; a[4] = -g[1]; a[5] = -g[2];
  for (int k = 1; k < nn; ++k) {
    const double* S = axes + 6 * (k - 1);
    double ap[6], c[6], Iv[6], Ia[6], vIv[6];
    mv(Xup[k], &a[6 * parent[k]], ap);
    cross_motion(&v[6 * k], &vJc[6 * k], c);
    for (int i = 0; i < 6; ++i) a[6 * k + i] = ap[i] + S[i] * qdd[k - 1] + c[i];
    Mat6 I;
    inertia6(inertia.typed_data() + 10 * k, I);
    mv(I, &a[6 * k], Ia);
    mv(I, &v[6 * k], Iv);
    cross_force(&v[6 * k], Iv, vIv);
    for (int i = 0; i < 6; ++i) f[6 * k + i] = Ia[i] + vIv[i];
  }
  double* tau = tau_b->typed_data();
  for (int k = nn - 1; k >= 1; --k) {
    const double* S = axes + 6 * (k - 1);
    double t = arm[k - 1] * qdd[k - 1];
    for (int i = 0; i < 6; ++i) t += S[i] * f[6 * k + i];
    tau[k - 1] = t;
    if (parent[k] == 0) continue;
    double fp[6];
    mtv(Xup[k], &f[6 * k], fp);
    for (int i = 0; i < 6; ++i) f[6 * parent[k] + i] += fp[i];
  }
  return ffi::Error::Success();
}

// The joint-space inertia matrix H + diag(armature), Featherstone (2008) Table 6.2.
ffi::Error Crba(ffi::Buffer<ffi::S32> kind_b, ffi::Buffer<ffi::S32> parent_b,
                ffi::Buffer<ffi::S32> qi_b, ffi::Buffer<ffi::F64> Etree,
                ffi::Buffer<ffi::F64> rtree, ffi::Buffer<ffi::F64> inertia,
                ffi::Buffer<ffi::F64> axes_b, ffi::Buffer<ffi::F64> armature,
                ffi::Buffer<ffi::F64> q_b, ffi::ResultBuffer<ffi::F64> H_b) {
  const int nn = static_cast<int>(parent_b.element_count());
  const int nv = nn - 1;
  const int32_t* parent = parent_b.typed_data();
  const double* axes = axes_b.typed_data();
  std::vector<Mat6> Xup(nn), Ic(nn);
  transforms(nn, kind_b.typed_data(), qi_b.typed_data(), Etree.typed_data(),
             rtree.typed_data(), axes, q_b.typed_data(), Xup);
  for (int k = 1; k < nn; ++k) inertia6(inertia.typed_data() + 10 * k, Ic[k]);
  double* H = H_b->typed_data();
  for (int i = 0; i < nv * nv; ++i) H[i] = 0;
  for (int k = nn - 1; k >= 1; --k) {
    const int p = parent[k];
    if (p != 0) {
      Mat6 T;
      const Mat6& X = Xup[k];
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          double s = 0;
          for (int l = 0; l < 6; ++l) s += Ic[k].m[i][l] * X.m[l][j];
          T.m[i][j] = s;
        }
      for (int i = 0; i < 6; ++i)
        for (int j = 0; j < 6; ++j) {
          double s = 0;
          for (int l = 0; l < 6; ++l) s += X.m[l][i] * T.m[l][j];
          Ic[p].m[i][j] += s;
        }
    }
  }
  for (int k = 1; k < nn; ++k) {
    double F[6], Fp[6];
    mv(Ic[k], axes + 6 * (k - 1), F);
    double h = armature.typed_data()[k - 1];
    for (int i = 0; i < 6; ++i) h += axes[6 * (k - 1) + i] * F[i];
    H[(k - 1) * nv + (k - 1)] = h;
    for (int j = k; parent[j] != 0; j = parent[j]) {
      mtv(Xup[j], F, Fp);
      for (int i = 0; i < 6; ++i) F[i] = Fp[i];
      const int pj = parent[j];
      double s = 0;
      for (int i = 0; i < 6; ++i) s += axes[6 * (pj - 1) + i] * F[i];
      H[(k - 1) * nv + (pj - 1)] = s;
      H[(pj - 1) * nv + (k - 1)] = s;
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdAba, Aba,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()  // kind
                                  .Arg<ffi::Buffer<ffi::S32>>()  // parent
                                  .Arg<ffi::Buffer<ffi::S32>>()  // qi
                                  .Arg<ffi::Buffer<ffi::S32>>()  // bias_to
                                  .Arg<ffi::Buffer<ffi::F64>>()  // Xtree E
                                  .Arg<ffi::Buffer<ffi::F64>>()  // Xtree r
                                  .Arg<ffi::Buffer<ffi::F64>>()  // inertia
                                  .Arg<ffi::Buffer<ffi::F64>>()  // axes
                                  .Arg<ffi::Buffer<ffi::F64>>()  // armature
                                  .Arg<ffi::Buffer<ffi::F64>>()  // gravity
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // tau
                                  .Ret<ffi::Buffer<ffi::F64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdRnea, Rnea,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()  // kind
                                  .Arg<ffi::Buffer<ffi::S32>>()  // parent
                                  .Arg<ffi::Buffer<ffi::S32>>()  // qi
                                  .Arg<ffi::Buffer<ffi::S32>>()  // bias_to
                                  .Arg<ffi::Buffer<ffi::F64>>()  // Xtree E
                                  .Arg<ffi::Buffer<ffi::F64>>()  // Xtree r
                                  .Arg<ffi::Buffer<ffi::F64>>()  // inertia
                                  .Arg<ffi::Buffer<ffi::F64>>()  // axes
                                  .Arg<ffi::Buffer<ffi::F64>>()  // armature
                                  .Arg<ffi::Buffer<ffi::F64>>()  // gravity
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qd
                                  .Arg<ffi::Buffer<ffi::F64>>()  // qdd
                                  .Ret<ffi::Buffer<ffi::F64>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxrbdCrba, Crba,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()  // kind
                                  .Arg<ffi::Buffer<ffi::S32>>()  // parent
                                  .Arg<ffi::Buffer<ffi::S32>>()  // qi
                                  .Arg<ffi::Buffer<ffi::F64>>()  // Xtree E
                                  .Arg<ffi::Buffer<ffi::F64>>()  // Xtree r
                                  .Arg<ffi::Buffer<ffi::F64>>()  // inertia
                                  .Arg<ffi::Buffer<ffi::F64>>()  // axes
                                  .Arg<ffi::Buffer<ffi::F64>>()  // armature
                                  .Arg<ffi::Buffer<ffi::F64>>()  // q
                                  .Ret<ffi::Buffer<ffi::F64>>());
