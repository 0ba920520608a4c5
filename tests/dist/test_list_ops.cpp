// Rooted and list forms of the ProcessGroup (spec A.2-A.3) on gloo and mpi with 2-4 real
// processes: reduce to a root (A.3 #25), gather (#39) and scatter (#41) with their root and list
// errors raised before posting (#40), list all_gather (#26-28 on the CPU), reduce_scatter over W
// inputs (#36-38), all_to_all with per-peer sizes that differ (#35), and receive from any source
// reporting the sender (#44, #45 where the engine has none: fake).
#include <set>

#include "dist/fake_process_group.h"
#include "dist_check.h"
#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

/// [n] of `dt` holding base + i.
Tensor ramp(int64_t n, double base, DType dt = DType::kFloat32) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(base + static_cast<double>(i));
  return Tensor::from_vector(v, {n}).to(dt);
}

std::vector<double> ramp_values(int64_t n, double base) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(base + static_cast<double>(i));
  return v;
}

// A.3 #25: reduce SUM to root 1 (rank r holds r): the root holds the sum, the others keep their
// data. AVG (f64) to root 0, MAX (i64) to the last rank, and a transposed (non-contiguous) view.
DIST_WORKER(reduce_to_root) {
  const int W = ctx.world, r = ctx.rank;
  Tensor x = Tensor::full({5}, r, DType::kFloat32);
  auto w = ctx.pg->reduce(x, ReduceOp::kSum, 1);
  EXPECT_TRUE(w->wait());
  EXPECT_TRUE(all_equal(x, r == 1 ? W * (W - 1) / 2.0 : r));
  ASSERT_EQ(w->result().size(), 1u);
  EXPECT_TRUE(same_memory(w->result()[0], x));

  Tensor a = Tensor::full({3}, r + 1, DType::kFloat64);
  ctx.pg->reduce(a, ReduceOp::kAvg, 0)->wait();
  EXPECT_TRUE(all_equal(a, r == 0 ? (W + 1) / 2.0 : r + 1));

  Tensor m = ramp(4, 10.0 * r, DType::kInt64);
  ctx.pg->reduce(m, ReduceOp::kMax, W - 1)->wait();
  EXPECT_TRUE(values_equal(m, ramp_values(4, r == W - 1 ? 10.0 * (W - 1) : 10.0 * r)));

  Tensor base = Tensor::from_vector(ramp_values(6, 100.0 * r), {2, 3});
  Tensor t = base.transpose(0, 1);
  ctx.pg->reduce(t, ReduceOp::kSum, 0)->wait();
  std::vector<double> want;
  for (int i = 0; i < 6; ++i)
    want.push_back(r == 0 ? W * i + 100.0 * W * (W - 1) / 2 : 100.0 * r + i);
  EXPECT_TRUE(values_equal(base, want));

  // bool: sum = or, product = and (the checked conversion the spec recommends for reduce too).
  Tensor bs = Tensor::full({3}, r == 0 ? 1 : 0, DType::kBool), bp = bs.clone();
  ctx.pg->reduce(bs, ReduceOp::kSum, 1)->wait();
  ctx.pg->reduce(bp, ReduceOp::kProduct, 0)->wait();
  EXPECT_TRUE(all_equal(bs, r == 1 || r == 0 ? 1 : 0));
  EXPECT_TRUE(all_equal(bp, 0));
  // f16 (a reduction kernel of anvil's) and a large f32 tensor (many engine segments).
  Tensor h = Tensor::full({9}, r + 1, DType::kFloat16);
  ctx.pg->reduce(h, ReduceOp::kProduct, W - 1)->wait();
  double fact = 1;
  for (int i = 1; i <= W; ++i) fact *= i;
  EXPECT_TRUE(all_equal(h, r == W - 1 ? fact : r + 1));
  const int64_t n = 600000;
  Tensor big = Tensor::empty({n}, DType::kFloat32);
  float* p = big.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>((i % 1000) * (r + 1));
  ctx.pg->reduce(big, ReduceOp::kSum, 1)->wait();
  bool good = true;
  const double mult = r == 1 ? W * (W + 1) / 2.0 : r + 1;
  for (int64_t i = 0; i < n && good; ++i) good = p[i] == static_cast<float>((i % 1000) * mult);
  EXPECT_TRUE(good) << "the large reduce differs";

  const uint64_t seq = ctx.pg->sequence_number();
  EXPECT_TRUE(throws_error([&] { ctx.pg->reduce(x, ReduceOp::kSum, W); },
                           {"root rank " + std::to_string(W) + " is outside the group"}));
  EXPECT_TRUE(throws_error([&] { ctx.pg->reduce(x, ReduceOp::kSum, -1); },
                           {"root rank -1 is outside the group"}));
  Tensor b = Tensor::full({2}, 1, DType::kBool);
  EXPECT_TRUE(throws_error([&] { ctx.pg->reduce(b, ReduceOp::kAvg, 0); },
                           {"Cannot use ReduceOp.AVG with boolean inputs"}));
  EXPECT_EQ(ctx.pg->sequence_number(), seq);  // refused before posting
}

// A.3 #39-41: gather to root 1 and scatter from root 0; the root's wrong list length, a root
// outside [0, W), a non-root's non-empty list and a mismatched tensor are errors raised before
// anything is posted (every rank makes the same mistakes, so the group stays in step).
DIST_WORKER(gather_scatter) {
  const int W = ctx.world, r = ctx.rank;
  const int groot = 1, sroot = 0;
  Tensor in = ramp(6, 100.0 * r).view({2, 3});
  std::vector<Tensor> outs;
  if (r == groot)
    for (int j = 0; j < W; ++j) outs.push_back(Tensor::full({2, 3}, -1, DType::kFloat32));
  auto g = ctx.pg->gather(outs, in, groot);
  EXPECT_TRUE(g->wait());
  if (r == groot) {
    for (int j = 0; j < W; ++j) EXPECT_TRUE(values_equal(outs[j], ramp_values(6, 100.0 * j)));
    EXPECT_EQ(g->result().size(), static_cast<size_t>(W));
  } else {
    EXPECT_TRUE(g->result().empty());
  }
  EXPECT_TRUE(values_equal(in, ramp_values(6, 100.0 * r)));  // the input is not modified

  // scatter of i16 (a dtype no reduction is needed for) into a non-contiguous output.
  std::vector<Tensor> ins;
  if (r == sroot)
    for (int j = 0; j < W; ++j) ins.push_back(ramp(4, 7 + 10 * j, DType::kInt16).view({2, 2}));
  Tensor base = Tensor::zeros({2, 2}, DType::kInt16);
  Tensor out = base.transpose(0, 1);
  ctx.pg->scatter(out, ins, sroot)->wait();
  EXPECT_TRUE(values_equal(out.contiguous(), ramp_values(4, 7 + 10 * r)));
  EXPECT_TRUE(values_equal(base, {7.0 + 10 * r, 9.0 + 10 * r, 8.0 + 10 * r, 10.0 + 10 * r}));

  // A.3 #40: errors before posting.
  const uint64_t seq = ctx.pg->sequence_number();
  std::vector<Tensor> short_list(static_cast<size_t>(W - 1),
                                 Tensor::zeros({2, 3}, DType::kFloat32));
  std::vector<Tensor> none;
  if (r == groot) {
    EXPECT_TRUE(throws_error([&] { ctx.pg->gather(short_list, in, groot); },
                             {"root's output list of gather is not valid for the number of "
                              "participants",
                              "expected " + std::to_string(W) + " tensors",
                              "got " + std::to_string(W - 1) + " tensors"}));
  } else {
    EXPECT_TRUE(throws_error([&] { ctx.pg->gather(short_list, in, groot); },
                             {"gather takes an empty output list on a rank other than the root"}));
  }
  EXPECT_TRUE(throws_error([&] { ctx.pg->gather(none, in, W); },
                           {"root rank " + std::to_string(W) + " is outside the group"}));
  Tensor s_out = Tensor::zeros({2, 3}, DType::kFloat32);
  if (r == sroot) {
    EXPECT_TRUE(throws_error([&] { ctx.pg->scatter(s_out, short_list, sroot); },
                             {"root's input list of scatter is not valid for the number of "
                              "participants"}));
    std::vector<Tensor> bad(static_cast<size_t>(W), Tensor::zeros({2, 3}, DType::kFloat32));
    bad[1] = Tensor::zeros({7}, DType::kFloat32);
    EXPECT_TRUE(throws_error([&] { ctx.pg->scatter(s_out, bad, sroot); },
                             {"tensor operand counts must be same", "input 1"}));
  }
  EXPECT_TRUE(throws_error([&] { ctx.pg->scatter(s_out, none, -2); },
                           {"root rank -2 is outside the group"}));
  EXPECT_EQ(ctx.pg->sequence_number(), seq);
  // Still in step: one more gather succeeds.
  Tensor one = Tensor::full({1}, r, DType::kInt32);
  std::vector<Tensor> got;
  if (r == 0)
    for (int j = 0; j < W; ++j) got.push_back(Tensor::zeros({1}, DType::kInt32));
  ctx.pg->gather(got, one, 0)->wait();
  if (r == 0) {
    for (int j = 0; j < W; ++j) EXPECT_TRUE(all_equal(got[j], j));
  }
}

// A.3 #26-28 (CPU): all_gather into W outputs, two at once (different dtypes), and the errors
// of a wrong output count and a wrong element count.
DIST_WORKER(all_gather_list) {
  const int W = ctx.world, r = ctx.rank;
  std::vector<Tensor> outs;
  for (int j = 0; j < W; ++j) outs.push_back(Tensor::zeros({3}, DType::kFloat32));
  auto w = ctx.pg->all_gather(outs, ramp(3, 10.0 * r));
  EXPECT_TRUE(w->wait());
  for (int j = 0; j < W; ++j) EXPECT_TRUE(values_equal(outs[j], ramp_values(3, 10.0 * j)));
  EXPECT_EQ(w->result().size(), static_cast<size_t>(W));

  std::vector<std::vector<Tensor>> nested(2);
  for (int j = 0; j < W; ++j) {
    nested[0].push_back(Tensor::zeros({2, 2}, DType::kInt64));
    nested[1].push_back(Tensor::zeros({1}, DType::kFloat16));
  }
  ctx.pg
      ->all_gather(nested, {ramp(4, r, DType::kInt64).view({2, 2}),
                            Tensor::full({1}, 0.5 * r, DType::kFloat16)})
      ->wait();
  for (int j = 0; j < W; ++j) {
    EXPECT_TRUE(values_equal(nested[0][j], ramp_values(4, j)));
    EXPECT_TRUE(all_equal(nested[1][j], 0.5 * j));
  }

  const uint64_t seq = ctx.pg->sequence_number();
  std::vector<Tensor> few(outs.begin(), outs.end() - 1);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_gather(few, ramp(3, 0)); },
                           {"output list of all_gather is not valid for the number of "
                            "participants"}));
  std::vector<Tensor> odd = outs;
  odd[W - 1] = Tensor::zeros({4}, DType::kFloat32);
  EXPECT_TRUE(
      throws_error([&] { ctx.pg->all_gather(odd, ramp(3, 0)); },
                   {"tensor operand counts must be same", "output " + std::to_string(W - 1)}));
  std::vector<Tensor> other_dtype = outs;
  other_dtype[0] = Tensor::zeros({3}, DType::kFloat64);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_gather(other_dtype, ramp(3, 0)); },
                           {"another dtype", "f32", "f64"}));
  EXPECT_EQ(ctx.pg->sequence_number(), seq);
}

// A.3 #36-38: reduce_scatter over W inputs (on rank k the j-th holds k + j): rank r gets
// sum_k (k + r); AVG; two at once; the list-length errors.
DIST_WORKER(reduce_scatter_list) {
  const int W = ctx.world, r = ctx.rank;
  std::vector<Tensor> ins;
  for (int j = 0; j < W; ++j) ins.push_back(Tensor::full({2, 2}, r + j, DType::kInt32));
  Tensor out = Tensor::zeros({2, 2}, DType::kInt32);
  auto w = ctx.pg->reduce_scatter(out, ins, ReduceOp::kSum);
  EXPECT_TRUE(w->wait());
  EXPECT_TRUE(all_equal(out, W * (W - 1) / 2.0 + W * r));  // W = 4: 6 + 4r
  for (int j = 0; j < W; ++j) EXPECT_TRUE(all_equal(ins[j], r + j));

  std::vector<std::vector<Tensor>> two(2);
  for (int j = 0; j < W; ++j) {
    two[0].push_back(ramp(3, r + j, DType::kFloat64));
    two[1].push_back(Tensor::full({1}, (r + 1) * (j + 1), DType::kInt64));
  }
  std::vector<Tensor> outs2{Tensor::zeros({3}, DType::kFloat64), Tensor::zeros({1}, DType::kInt64)};
  ctx.pg->reduce_scatter(outs2, two, ReduceOp::kMax)->wait();
  EXPECT_TRUE(values_equal(outs2[0], ramp_values(3, W - 1 + r)));
  EXPECT_TRUE(all_equal(outs2[1], W * (r + 1)));
  std::vector<Tensor> favg;
  for (int j = 0; j < W; ++j) favg.push_back(Tensor::full({2}, r + j, DType::kFloat32));
  Tensor avg = Tensor::zeros({2}, DType::kFloat32);
  ctx.pg->reduce_scatter(avg, favg, ReduceOp::kAvg)->wait();
  EXPECT_TRUE(all_equal(avg, (W - 1) / 2.0 + r));

  const uint64_t seq = ctx.pg->sequence_number();
  std::vector<Tensor> one_out{Tensor::zeros({2, 2}, DType::kInt32)};
  std::vector<std::vector<Tensor>> two_lists{ins, ins};
  EXPECT_TRUE(throws_error([&] { ctx.pg->reduce_scatter(one_out, two_lists, ReduceOp::kSum); },
                           {"Tensor input/output list for reduce_scatter must have same size"}));
  std::vector<Tensor> short_ins(ins.begin(), ins.end() - 1);
  EXPECT_TRUE(throws_error([&] { ctx.pg->reduce_scatter(out, short_ins, ReduceOp::kSum); },
                           {"input list of reduce_scatter is not valid for the number of "
                            "participants"}));
  EXPECT_EQ(ctx.pg->sequence_number(), seq);
}

// A.3 #35: all_to_all with per-peer tensors whose sizes differ: rank r sends rank j a
// [r+1, j+1] block holding 1000 r + 10 j + i; rank j receives it as a flat [(r+1)(j+1)].
DIST_WORKER(all_to_all_list) {
  const int W = ctx.world, r = ctx.rank;
  std::vector<Tensor> ins, outs;
  for (int j = 0; j < W; ++j) {
    ins.push_back(ramp((r + 1) * (j + 1), 1000.0 * r + 10 * j, DType::kInt64).view({r + 1, j + 1}));
    outs.push_back(Tensor::full({(j + 1) * (r + 1)}, -1, DType::kInt64));
  }
  auto w = ctx.pg->all_to_all(outs, ins);
  EXPECT_TRUE(w->wait());
  for (int j = 0; j < W; ++j)
    EXPECT_TRUE(values_equal(outs[j], ramp_values((j + 1) * (r + 1), 1000.0 * j + 10 * r)))
        << "block from rank " << j;
  // Empty blocks to and from every peer but the next rank.
  std::vector<Tensor> e_in, e_out;
  const int next = (r + 1) % W, prev = (r - 1 + W) % W;
  for (int j = 0; j < W; ++j) {
    e_in.push_back(Tensor::full({j == next || j == r ? 2 : 0}, r, DType::kFloat32));
    e_out.push_back(Tensor::zeros({j == prev || j == r ? 2 : 0}, DType::kFloat32));
  }
  ctx.pg->all_to_all(e_out, e_in)->wait();
  EXPECT_TRUE(all_equal(e_out[prev], prev));
  EXPECT_TRUE(all_equal(e_out[r], r));

  const uint64_t seq = ctx.pg->sequence_number();
  std::vector<Tensor> short_ins(ins.begin(), ins.end() - 1);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_to_all(outs, short_ins); },
                           {"input list of all_to_all is not valid for the number of "
                            "participants"}));
  std::vector<Tensor> mixed = outs;
  mixed[0] = Tensor::zeros(outs[0].sizes(), DType::kInt32);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_to_all(mixed, ins); },
                           {"the output dtype differs from the input dtype"}));
  std::vector<Tensor> self_bad = outs;
  self_bad[static_cast<size_t>(r)] = Tensor::zeros({99}, DType::kInt64);
  EXPECT_TRUE(throws_error([&] { ctx.pg->all_to_all(self_bad, ins); },
                           {"the tensor this rank sends itself"}));
  EXPECT_EQ(ctx.pg->sequence_number(), seq);
}

// A.3 #44 with any source: rank 0 posts W-1 receives from any source (tag 3); every other rank
// sends it [4] holding its rank. Each Work names the sender, whose value the buffer holds.
DIST_WORKER(recv_any) {
  const int W = ctx.world, r = ctx.rank;
  if (r == 0) {
    std::vector<Tensor> bufs;
    std::vector<std::shared_ptr<Work>> works;
    for (int i = 1; i < W; ++i) {
      bufs.push_back(Tensor::full({4}, -1, DType::kFloat32));
      works.push_back(ctx.pg->recv_any_source(bufs.back(), 3));
    }
    std::set<int> senders;
    for (size_t i = 0; i < works.size(); ++i) {
      EXPECT_TRUE(works[i]->wait(std::chrono::milliseconds(30000)));
      const int src = works[i]->source_rank();
      senders.insert(src);
      EXPECT_TRUE(all_equal(bufs[i], src)) << "buffer " << i << " from rank " << src;
    }
    std::set<int> want;
    for (int i = 1; i < W; ++i) want.insert(i);
    EXPECT_EQ(senders, want);
  } else {
    auto s = ctx.pg->send(Tensor::full({4}, r, DType::kFloat32), 0, 3);
    EXPECT_TRUE(s->wait(std::chrono::milliseconds(30000)));
    EXPECT_TRUE(throws_error([&] { s->source_rank(); }, {"source_rank() may only be called"}));
  }
  Tensor t = Tensor::zeros({1}, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { ctx.pg->recv_any_source(t, -1); }, {"tag must be non-negative"}));
  ctx.pg->barrier()->wait();
}

// ANVIL_DIST_DEBUG=1: list all_to_all sizes that disagree across ranks (rank 0 expects 2
// elements from rank 1, which sends 1) fail the op on every rank, naming both; the group stays
// usable.
DIST_WORKER(all_to_all_mismatch) {
  const int W = ctx.world, r = ctx.rank;
  std::vector<Tensor> ins, outs;
  for (int j = 0; j < W; ++j) {
    ins.push_back(Tensor::full({1}, r, DType::kFloat32));
    outs.push_back(Tensor::zeros({r == 0 && j == 1 ? 2 : 1}, DType::kFloat32));
  }
  auto w = ctx.pg->all_to_all(outs, ins);
  EXPECT_TRUE(throws_error([&] { w->wait(); }, {"all_to_all split sizes disagree",
                                                "rank 0 expects 2 elements from rank 1"}));
  Tensor y = Tensor::full({3}, r, DType::kFloat32);
  ctx.pg->all_reduce(y, ReduceOp::kSum)->wait();
  EXPECT_TRUE(all_equal(y, W * (W - 1) / 2.0));
}

class ListOps : public ::testing::TestWithParam<DistParam> {};

TEST_P(ListOps, Case25_ReduceToARoot) { EXPECT_DIST_JOB_OK("reduce_to_root"); }
TEST_P(ListOps, Case39to41_GatherScatterAndTheirRootErrors) {
  EXPECT_DIST_JOB_OK("gather_scatter");
}
TEST_P(ListOps, Case26to28_AllGatherIntoAList) { EXPECT_DIST_JOB_OK("all_gather_list"); }
TEST_P(ListOps, Case36to38_ReduceScatterOfWInputs) { EXPECT_DIST_JOB_OK("reduce_scatter_list"); }
TEST_P(ListOps, Case35_AllToAllPerPeerSizesDiffer) { EXPECT_DIST_JOB_OK("all_to_all_list"); }
TEST_P(ListOps, Case44_RecvFromAnySourceNamesTheSender) { EXPECT_DIST_JOB_OK("recv_any"); }
TEST_P(ListOps, ConsistencyCheckCatchesAllToAllSizesThatDisagree) {
  JobOptions o;
  o.env["ANVIL_DIST_DEBUG"] = "1";
  EXPECT_DIST_JOB_OK("all_to_all_mismatch", o);
}

INSTANTIATE_TEST_SUITE_P(Dist, ListOps, ::testing::ValuesIn(all_params()), param_name);

// The fake backend (one process, no peers): the rooted and list forms give shape-correct outputs
// as if every rank held this rank's data; receive from any source is refused (A.3 #45's error).
TEST(ListOpsFake, RootedFormsAndRecvAnySourceRefused) {
  auto pg = std::make_shared<FakeProcessGroup>(1, 3);
  Tensor in = ramp(2, 5);
  std::vector<Tensor> outs{Tensor::zeros({2}, DType::kFloat32), Tensor::zeros({2}, DType::kFloat32),
                           Tensor::zeros({2}, DType::kFloat32)};
  pg->gather(outs, in, 1)->wait();
  for (const Tensor& o : outs) EXPECT_TRUE(values_equal(o, {5, 6}));
  Tensor out = Tensor::zeros({2}, DType::kFloat32);
  std::vector<Tensor> ins{ramp(2, 0), ramp(2, 10), ramp(2, 20)};
  pg->scatter(out, ins, 1)->wait();
  EXPECT_TRUE(values_equal(out, {10, 11}));
  Tensor x = Tensor::full({2}, 4, DType::kFloat32);
  pg->reduce(x, ReduceOp::kMax, 1)->wait();
  EXPECT_TRUE(all_equal(x, 4));
  // List forms: all_gather repeats the input, reduce_scatter keeps this rank's input, all_to_all
  // puts this rank's own block in every slot.
  std::vector<Tensor> ag{Tensor::zeros({2}, DType::kFloat32), Tensor::zeros({2}, DType::kFloat32),
                         Tensor::zeros({2}, DType::kFloat32)};
  pg->all_gather(ag, ramp(2, 3))->wait();
  for (const Tensor& o : ag) EXPECT_TRUE(values_equal(o, {3, 4}));
  Tensor rs = Tensor::zeros({2}, DType::kFloat32);
  pg->reduce_scatter(rs, ins, ReduceOp::kSum)->wait();
  EXPECT_TRUE(values_equal(rs, {10, 11}));
  std::vector<Tensor> a2a{Tensor::zeros({2}, DType::kFloat32), Tensor::zeros({2}, DType::kFloat32),
                          Tensor::zeros({2}, DType::kFloat32)};
  pg->all_to_all(a2a, ins)->wait();
  for (const Tensor& o : a2a) EXPECT_TRUE(values_equal(o, {10, 11}));
  Tensor t = Tensor::zeros({1}, DType::kFloat32);
  EXPECT_TRUE(throws_error([&] { pg->recv_any_source(t); },
                           {"backend fake does not support recv_any_source"}));
  auto single = std::make_shared<FakeProcessGroup>(0, 1);
  EXPECT_TRUE(throws_error([&] { single->recv_any_source(t); },
                           {"recv_any_source needs a peer", "1 rank"}));
}

}  // namespace
}  // namespace anvil::dist::test
