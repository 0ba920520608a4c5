#include "core/conv_transpose_geometry.h"

#include "core/error.h"

namespace anvil {

namespace {

/// `v` expanded to `n` values (one value applies to every dim).
std::vector<int64_t> per_dim(const std::vector<int64_t>& v, size_t n, const char* name,
                             const std::string& where) {
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  ANVIL_CHECK(v.size() == n, where, str("'", name, "' must have 1 or ", n, " values"),
              str(n, " values"), std::to_string(v.size()));
  return v;
}

}  // namespace

ConvTransposeGeom conv_transpose_geometry(const Shape& x, const Shape& wt,
                                          const ConvTransposeArgs& a, const std::string& where) {
  ANVIL_CHECK(wt.size() == 3 || wt.size() == 4, where,
              "only 1-D and 2-D transposed convolutions are supported", "a 3-D or 4-D weight",
              shape_str(wt));
  ConvTransposeGeom g;
  g.spatial = wt.size() - 2;
  const size_t sp = g.spatial;
  g.unbatched = x.size() == sp + 1;
  ANVIL_CHECK(x.size() == sp + 2 || g.unbatched, where,
              str("a ", sp, "-D transposed convolution needs a ", sp + 2, "-D (or unbatched ",
                  sp + 1, "-D) input"),
              str(sp + 2, "-D"), shape_str(x));
  const size_t b0 = g.unbatched ? 0 : 1;
  g.n = g.unbatched ? 1 : x[0];
  g.c = x[b0];
  g.w = x.back();
  g.h = sp == 2 ? x[x.size() - 2] : 1;
  g.groups = a.groups;
  ANVIL_CHECK(g.groups > 0, where, "groups must be positive", "> 0", std::to_string(g.groups));
  ANVIL_CHECK(wt[0] == g.c && g.c % g.groups == 0, where,
              str("weight does not fit the input with groups=", g.groups),
              str("weight [", g.c, " (divisible by ", g.groups, "), O/groups, ...]"),
              shape_str(wt));
  g.o = wt[1] * g.groups;
  g.kw = wt.back();
  g.kh = sp == 2 ? wt[2] : 1;
  const auto s = per_dim(a.stride, sp, "stride", where);
  const auto p = per_dim(a.padding, sp, "padding", where);
  const auto op = per_dim(a.output_padding, sp, "output_padding", where);
  const auto d = per_dim(a.dilation, sp, "dilation", where);
  for (size_t i = 0; i < sp; ++i) {
    ANVIL_CHECK(s[i] > 0, where, "stride must be positive", "> 0", str(s[i]));
    ANVIL_CHECK(d[i] > 0, where, "dilation must be positive", "> 0", str(d[i]));
    ANVIL_CHECK(p[i] >= 0, where, "negative padding", ">= 0", str(p[i]));
    ANVIL_CHECK(op[i] >= 0 && (op[i] < s[i] || op[i] < d[i]), where,
                "output padding must be smaller than either stride or dilation",
                str("0 <= output_padding < max(stride, dilation)"), str(op[i]));
  }
  g.sw = s.back();
  g.pw = p.back();
  g.opw = op.back();
  g.dw = d.back();
  if (sp == 2) {
    g.sh = s[0];
    g.ph = p[0];
    g.oph = op[0];
    g.dh = d[0];
  }
  g.oh = (g.h - 1) * g.sh - 2 * g.ph + g.dh * (g.kh - 1) + g.oph + 1;
  g.ow = (g.w - 1) * g.sw - 2 * g.pw + g.dw * (g.kw - 1) + g.opw + 1;
  ANVIL_CHECK(g.oh > 0 && g.ow > 0, where, "the output of the transposed convolution is empty",
              "a positive output size", str(g.oh, "x", g.ow));
  return g;
}

Shape conv_transpose_sizes(const Shape& x, const Shape& wt, const ConvTransposeArgs& a,
                           const std::string& where) {
  const ConvTransposeGeom g = conv_transpose_geometry(x, wt, a, where);
  Shape s;
  if (!g.unbatched) s.push_back(g.n);
  s.push_back(g.o);
  if (g.spatial == 2) s.push_back(g.oh);
  s.push_back(g.ow);
  return s;
}

}  // namespace anvil
