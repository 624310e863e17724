// NbdExport in-process: the NBD semantics on a stack (flags, block sizes, errors, extents,
// per-thread queues, close), without a server. tests/nbd/nbd_clients_test.cc drives the same
// code through nbdkit with real clients.
#include "nbd/nbd_export.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "lib/forwarding_layer.h"
#include "lib/registry.h"
#include "lib/sync_io.h"
#include "tests/formats/vhd_test_util.h"
#include "tests/testing/recording_device.h"
#include "tests/testing/test_util.h"

namespace vstack::nbd {
namespace {

using testing::Rng;
using testing::TempDir;

// Forwards everything to the device below but claims fewer capabilities, to serve stacks that
// lack fast zeroes or thread safety.
class MaskedDevice final : public ForwardingLayer {
 public:
  MaskedDevice(DevicePtr lower, Capabilities remove)
      : ForwardingLayer("masked", std::move(lower)) {
    set_capabilities(capabilities() & ~remove);
  }
};

std::unique_ptr<NbdExport> Serve(const std::string& spec, bool read_only = false) {
  auto e = NbdExport::Open(spec, read_only);
  EXPECT_TRUE(testing::IsOk(e));
  return e ? std::move(*e) : nullptr;
}

std::unique_ptr<NbdExport> ServeMasked(const std::string& spec, Capabilities remove) {
  auto dev = Open(spec);
  EXPECT_TRUE(testing::IsOk(dev));
  if (!dev) return nullptr;
  return std::make_unique<NbdExport>("masked+" + spec,
                                     MakeDevice<MaskedDevice>(std::move(*dev), remove));
}

TEST(NbdErrno, MapsVstackAndSystemErrorsToWhatNbdSends) {
  EXPECT_EQ(ErrnoFor({}), 0);
  EXPECT_EQ(ErrnoFor(Errc::kReadOnly), EROFS);  // nbdkit sends NBD_EPERM
  EXPECT_EQ(ErrnoFor(Errc::kNotSupported), EOPNOTSUPP);  // NBD_ENOTSUP for a fast zero
  EXPECT_EQ(ErrnoFor(Errc::kNoSpace), ENOSPC);
  EXPECT_EQ(ErrnoFor(Errc::kInvalidArgument), EINVAL);
  EXPECT_EQ(ErrnoFor(Errc::kUnaligned), EINVAL);
  EXPECT_EQ(ErrnoFor(Errc::kCorruption), EIO);
  EXPECT_EQ(ErrnoFor(Errc::kChecksumMismatch), EIO);
  EXPECT_EQ(ErrnoFor(Errc::kIo), EIO);
  EXPECT_EQ(ErrnoFor(Errc::kCancelled), ESHUTDOWN);
  EXPECT_EQ(ErrnoFor(SystemError(ENOSPC)), ENOSPC);  // OS errors pass through
  EXPECT_EQ(ErrnoFor(SystemError(EDQUOT)), EDQUOT);
  EXPECT_EQ(ErrnoFor(std::make_error_code(std::errc::io_error)), EIO);
  EXPECT_EQ(ErrnoFor(std::error_code(7, std::iostream_category())), EIO);  // unknown: EIO
}

TEST(NbdExport, BlockSizesFollowTheGeometry) {
  auto e512 = Serve("memory:64M");
  ASSERT_TRUE(e512);
  EXPECT_EQ(e512->block_sizes().minimum, 512u);
  EXPECT_EQ(e512->block_sizes().preferred, 512u);
  EXPECT_EQ(e512->block_sizes().maximum, kMaxRequestBytes);
  auto e4k = Serve("memory:64M,block=4096");
  ASSERT_TRUE(e4k);
  EXPECT_EQ(e4k->block_sizes().minimum, 4096u);
  EXPECT_EQ(e4k->block_sizes().preferred, 4096u);
  EXPECT_EQ(e4k->block_sizes().maximum % 4096, 0u);
  EXPECT_EQ(e4k->size(), 64u << 20);
}

TEST(NbdExport, FlagsFollowTheCapabilities) {
  auto rw = Serve("memory:64M");
  ASSERT_TRUE(rw);
  const ExportFlags f = rw->flags();
  EXPECT_TRUE(f.writable && f.flush && f.fua && f.trim && f.zero && f.fast_zero && f.extents &&
              f.multi_conn);
  EXPECT_TRUE(rw->parallel());

  auto ro = Serve("memory:64M", /*read_only=*/true);
  ASSERT_TRUE(ro);
  const ExportFlags r = ro->flags();
  EXPECT_FALSE(r.writable || r.fua || r.trim || r.zero || r.fast_zero);
  EXPECT_TRUE(r.flush && r.extents);

  auto single = ServeMasked("memory:64M", kCapThreadSafe | kCapExtents);
  ASSERT_TRUE(single);
  EXPECT_FALSE(single->parallel());
  EXPECT_FALSE(single->flags().multi_conn);
  EXPECT_FALSE(single->flags().extents);
}

TEST(NbdExport, ProbesAnImagePathAndNamesTheSpecInErrors) {
  TempDir dir;
  testing::WriteFile(dir.File("raw.img"), 1 << 20, 0x5a);
  auto e = Serve(dir.File("raw.img"), true);
  ASSERT_TRUE(e);
  EXPECT_NE(e->spec().find("file:"), std::string::npos) << e->spec();
  std::vector<unsigned char> buf(4096);
  ASSERT_TRUE(testing::IsOk(e->Read(buf.data(), 4096, 4096)));
  EXPECT_EQ(buf[0], 0x5a);

  auto bad = NbdExport::Open("nosuch+memory:1M", false);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().ToString().find("nosuch"), std::string::npos);
}

TEST(NbdExport, WriteFlagsAndZeroesFollowNbdSemantics) {
  auto e = Serve("memory:64M");
  ASSERT_TRUE(e);
  std::vector<unsigned char> data(64 << 10, 0xab), back(64 << 10);
  ASSERT_TRUE(testing::IsOk(e->Write(data.data(), data.size(), 1 << 20, kIoFua)));
  ASSERT_TRUE(testing::IsOk(e->Read(back.data(), back.size(), 1 << 20)));
  EXPECT_EQ(back, data);
  // Zero with MAY_TRIM and FAST_ZERO on a stack that zeroes without writing data.
  ASSERT_TRUE(testing::IsOk(e->Zero(16 << 10, 1 << 20, kIoMayUnmap | kIoFastZero | kIoFua)));
  ASSERT_TRUE(testing::IsOk(e->Read(back.data(), back.size(), 1 << 20)));
  for (size_t i = 0; i < back.size(); ++i) {
    ASSERT_EQ(back[i], i < (16u << 10) ? 0 : 0xab) << "byte " << i;
  }
  ASSERT_TRUE(testing::IsOk(e->Trim(64 << 10, 1 << 20, kIoFua)));
  ASSERT_TRUE(testing::IsOk(e->Flush()));
  // Zero-length requests are no-ops, as NBD allows.
  EXPECT_TRUE(testing::IsOk(e->Write(data.data(), 0, 0, 0)));
  EXPECT_TRUE(testing::IsOk(e->Read(back.data(), 0, 0)));
}

TEST(NbdExport, FastZeroFailsAtOnceWhereZeroingWouldWriteData) {
  auto e = ServeMasked("memory:64M", kCapFastZeroes);
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->flags().fast_zero);  // advertised: the answer is fast, even when it is "no"
  std::vector<unsigned char> data(8192, 0x77), back(8192);
  ASSERT_TRUE(testing::IsOk(e->Write(data.data(), data.size(), 0, 0)));
  const std::error_code ec = e->Zero(8192, 0, kIoFastZero);
  EXPECT_EQ(ec, make_error_code(Errc::kNotSupported));
  EXPECT_EQ(ErrnoFor(ec), EOPNOTSUPP);
  ASSERT_TRUE(testing::IsOk(e->Read(back.data(), back.size(), 0)));
  EXPECT_EQ(back, data) << "a refused fast zero must leave the data alone";
  // Without FAST_ZERO the same request is done (by the queue's emulation if need be).
  ASSERT_TRUE(testing::IsOk(e->Zero(8192, 0, 0)));
  ASSERT_TRUE(testing::IsOk(e->Read(back.data(), back.size(), 0)));
  EXPECT_EQ(back, std::vector<unsigned char>(8192, 0));
}

TEST(NbdExport, StackErrorsComeBackAsErrorCodes) {
  auto ro = Serve("memory:64M", true);
  ASSERT_TRUE(ro);
  std::vector<unsigned char> buf(4096);
  EXPECT_EQ(ErrnoFor(ro->Write(buf.data(), 4096, 0, 0)), EROFS);
  EXPECT_EQ(ErrnoFor(ro->Zero(4096, 0, 0)), EROFS);
  auto e4k = Serve("memory:64M,block=4096");
  ASSERT_TRUE(e4k);
  EXPECT_EQ(e4k->Read(buf.data(), 512, 0), make_error_code(Errc::kUnaligned));
  EXPECT_EQ(ErrnoFor(e4k->Read(buf.data(), 512, 0)), EINVAL);
  EXPECT_EQ(ErrnoFor(e4k->Read(buf.data(), 4096, 64u << 20)), ERANGE);
}

TEST(NbdExport, MisalignedClientBuffersAreBouncedForDirectIo) {
  TempDir dir;
  auto e = Serve("file:" + dir.File("d.img") + ",create=on,size=8M,direct=on");
  ASSERT_TRUE(e);
  ASSERT_GT(e->device().geometry().mem_alignment, 1u);
  Rng rng(7);
  std::vector<unsigned char> storage((64 << 10) + 1), back((64 << 10) + 1);
  unsigned char* odd = storage.data() + 1;  // never aligned for O_DIRECT
  rng.Fill(odd, 64 << 10);
  ASSERT_TRUE(testing::IsOk(e->Write(odd, 64 << 10, 4096, 0)));
  ASSERT_TRUE(testing::IsOk(e->Read(back.data() + 1, 64 << 10, 4096)));
  EXPECT_EQ(0, std::memcmp(odd, back.data() + 1, 64 << 10));
}

TEST(NbdExport, ExtentsReportHolesAndStopAtTheWindow) {
  auto e = Serve("memory:4G");
  ASSERT_TRUE(e);
  std::vector<unsigned char> data(8192, 1);
  ASSERT_TRUE(testing::IsOk(e->Write(data.data(), data.size(), 1 << 20, 0)));
  std::vector<Extent> out;
  ASSERT_TRUE(testing::IsOk(e->Extents(4u << 20, 0, &out)));
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0], (Extent{0, 1 << 20, kExtentHole | kExtentZero}));
  EXPECT_EQ(out[1], (Extent{1 << 20, 8192, 0}));
  EXPECT_EQ(out[2], (Extent{(1 << 20) + 8192, (3 << 20) - 8192, kExtentHole | kExtentZero}));
  // A request for (almost) 4 GiB is answered for the first window only; the client goes on.
  out.clear();
  ASSERT_TRUE(testing::IsOk(e->Extents(0xfffff000u, 0, &out)));
  EXPECT_EQ(out.back().offset + out.back().length, kExtentWindow);
  out.clear();
  ASSERT_TRUE(testing::IsOk(e->Extents(1u << 20, (4ull << 30) - 4096, &out)));  // clipped at end
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].length, 4096u);
  EXPECT_FALSE(e->Extents(512, 4ull << 30, &out));
}

// nbdkit's parallel thread model: several server threads, each with its own queue, on a plain
// backend and on stacks whose layers share metadata (dedup and zstd commits on the flushes,
// crc32c's dirty regions). The ThreadSanitizer build runs it too.
TEST(NbdExport, EveryServerThreadGetsItsOwnQueue) {
  for (const char* spec : {"memory:64M", "dedup:size=64M+zstd+memory:128M", "crc32c+memory:72M"}) {
    SCOPED_TRACE(spec);
    auto e = Serve(spec);
    ASSERT_TRUE(e);
    constexpr int kThreads = 4;
    std::vector<std::thread> threads;
    std::vector<int> failures(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        Rng rng(t);
        std::vector<unsigned char> data(16 << 10), back(16 << 10);
        for (int i = 0; i < 200; ++i) {
          rng.Fill(data.data(), data.size());
          const uint64_t off = (uint64_t(t) << 24) + rng.Below(1000) * 16384;
          if (e->Write(data.data(), data.size(), off, 0) ||
              e->Read(back.data(), back.size(), off) || back != data ||
              (i % 50 == 49 && e->Flush())) {
            ++failures[t];
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
    // The threads are gone, and so are their queues: the stack closes cleanly.
    EXPECT_TRUE(testing::IsOk(e->Close()));
    EXPECT_EQ(e->device().Stats().of(Op::kWrite).ops, kThreads * 200u);
  }
}

TEST(NbdExport, ASingleQueueStackServesOneConnectionAtATime) {
  auto e = ServeMasked("memory:64M", kCapThreadSafe);
  ASSERT_TRUE(e);
  std::vector<unsigned char> buf(4096, 3);
  ASSERT_TRUE(testing::IsOk(e->Write(buf.data(), 4096, 0, 0)));  // this thread holds the queue
  std::error_code other;
  std::thread([&] { other = e->Read(buf.data(), 4096, 0); }).join();
  EXPECT_EQ(other, make_error_code(Errc::kBusy));
  e->ReleaseThreadQueue();  // the connection ends
  std::thread([&] {
    other = e->Read(buf.data(), 4096, 0);
    e->ReleaseThreadQueue();
  }).join();
  EXPECT_TRUE(testing::IsOk(other));
  EXPECT_TRUE(testing::IsOk(e->Flush()));  // and this thread can take it back
  EXPECT_TRUE(testing::IsOk(e->Close()));
}

TEST(NbdExport, CloseFlushesWhatClientsWroteThenClosesTheStack) {
  auto mem = Open("memory:16M");
  ASSERT_TRUE(testing::IsOk(mem));
  auto recording = MakeDevice<testing::RecordingDevice>(std::move(*mem));
  auto* log = static_cast<testing::RecordingDevice*>(recording.get());
  NbdExport e("recording+memory:16M", std::move(recording));
  std::vector<unsigned char> buf(4096, 9);
  std::thread([&] { ASSERT_TRUE(testing::IsOk(e.Write(buf.data(), 4096, 8192, 0))); }).join();
  ASSERT_TRUE(testing::IsOk(e.Write(buf.data(), 4096, 0, 0)));  // this thread's queue stays open
  ASSERT_TRUE(testing::IsOk(e.Close()));
  const auto ops = log->Log();
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops.back().op, Op::kFlush);
  EXPECT_GT(ops.back().submitted, std::max(ops[0].completed, ops[1].completed));
  // Closed: data calls fail cleanly, Close is idempotent.
  EXPECT_EQ(ErrnoFor(e.Read(buf.data(), 4096, 0)), ESHUTDOWN);
  EXPECT_TRUE(testing::IsOk(e.Close()));
}

}  // namespace
}  // namespace vstack::nbd

namespace vstack::nbd {
namespace {

// Block status of a range inside one sector of a partly written dynamic-VHD block (bytes
// 100..199) returns an extent covering exactly it: it used to return none, which nbdkit
// rejects ("plugin must return at least one extent").
TEST(NbdExport, BlockStatusOfPartOfASectorInAPartlyWrittenVhdBlock) {
  TempDir dir;
  const std::string path = dir.File("p.vhd");
  ASSERT_TRUE(testing::IsOk(CreateImage("vhd", path, 8 << 20)));
  auto e = Serve("vhd+file:" + path);
  ASSERT_NE(e, nullptr);
  std::vector<unsigned char> buf(512, 7);
  ASSERT_TRUE(testing::IsOk(e->Write(buf.data(), 512, 0, 0)));  // sector 0 of block 0 only
  for (const auto& [offset, flags] :
       {std::pair<uint64_t, uint32_t>{100, 0}, std::pair<uint64_t, uint32_t>{600, kExtentZero}}) {
    std::vector<Extent> out;
    ASSERT_TRUE(testing::IsOk(e->Extents(100, offset, &out)));
    ASSERT_EQ(out.size(), 1u) << "offset " << offset;
    EXPECT_EQ(out[0], (Extent{offset, 100, flags}));
  }
  std::vector<Extent> across;  // 400..1023: the end of sector 0, then a clear sector
  ASSERT_TRUE(testing::IsOk(e->Extents(624, 400, &across)));
  ASSERT_EQ(across.size(), 2u);
  EXPECT_EQ(across[0], (Extent{400, 112, 0}));
  EXPECT_EQ(across[1], (Extent{512, 512, kExtentZero}));
  EXPECT_TRUE(testing::IsOk(e->Close()));
}

// `vstack serve disk.raw`: the path probes as raw, and a client cannot write a VHD footer
// into the last sector (or a cookie at offset 0) to make the next open probe it as a VHD.
TEST(NbdExport, ServedRawPathKeepsItsFormat) {
  TempDir dir;
  const std::string raw = dir.File("disk.raw");
  ASSERT_TRUE(testing::IsOk(CreateImage("raw", raw, 4 << 20)));
  const std::string fixed = dir.File("f.vhd");
  ASSERT_TRUE(testing::IsOk(CreateImage("vhd", fixed, 1 << 20, "subformat=fixed")));
  const auto fixed_bytes = testing::ReadAll(fixed);
  const std::vector<unsigned char> footer(fixed_bytes.end() - 512, fixed_bytes.end());
  {
    auto e = Serve(raw);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(ErrnoFor(e->Write(footer.data(), 512, (4 << 20) - 512, 0)), EROFS);
    EXPECT_EQ(ErrnoFor(e->Write(footer.data(), 512, 0, 0)), EROFS) << "the cookie at offset 0";
    std::vector<unsigned char> data(512, 0x5A);  // ordinary data there is fine
    EXPECT_TRUE(testing::IsOk(e->Write(data.data(), 512, (4 << 20) - 512, 0)));
    EXPECT_TRUE(testing::IsOk(e->Close()));
  }
  std::string spec;
  auto again = OpenImage(raw, {}, &spec);
  ASSERT_TRUE(testing::IsOk(again));
  EXPECT_EQ(spec.rfind("file:", 0), 0u) << spec;
  EXPECT_EQ((*again)->size_bytes(), 4u << 20);
  again->reset();
  // Named, the file takes any bytes.
  auto named = NbdExport::Open("file:" + raw, false);
  ASSERT_TRUE(testing::IsOk(named));
  EXPECT_TRUE(testing::IsOk((*named)->Write(footer.data(), 512, (4 << 20) - 512, 0)));
  EXPECT_TRUE(testing::IsOk((*named)->Close()));
}

}  // namespace
}  // namespace vstack::nbd
