// RESP request parser, reply writer, reply scanner and reply parser.
#include <gtest/gtest.h>
#include <time.h>

#include <algorithm>
#include <cstdio>

#include <random>
#include <string>
#include <vector>

#include "conduit/kv/resp.h"

namespace conduit::kv {
namespace {

using Outcome = RequestParser::Outcome;

struct Parsed {
  std::vector<std::vector<std::string>> commands;
  std::string error;
  size_t consumed = 0;
};

// Feeds `input` in chunks of `chunk` bytes, keeping unconsumed bytes like a server does.
Parsed feed(const std::string& input, size_t chunk = SIZE_MAX, ProtocolLimits limits = {}) {
  RequestParser p(limits);
  Parsed out;
  std::string buf;
  size_t pos = 0;
  while (pos < input.size() || !buf.empty()) {
    const size_t n = std::min(chunk, input.size() - pos);
    buf.append(input, pos, n);
    pos += n;
    bool progress = true;
    while (progress && !buf.empty()) {
      size_t consumed = 0;
      const Outcome o = p.parse(buf.data(), buf.size(), &consumed);
      progress = false;
      if (o == Outcome::kCommand) {
        std::vector<std::string> args;
        for (std::string_view a : p.args()) args.emplace_back(a);
        out.commands.push_back(args);
      } else if (o == Outcome::kError) {
        out.error = p.error();
        return out;
      } else if (o == Outcome::kNeedMore) {
        break;
      }
      buf.erase(0, consumed);
      out.consumed += consumed;
      progress = true;
    }
    if (n == 0) break;  // no more input
  }
  return out;
}

using Cmd = std::vector<std::string>;

TEST(RequestParser, MultibulkCommand) {
  auto r = feed("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
  ASSERT_EQ(r.commands.size(), 1u);
  EXPECT_EQ(r.commands[0], (Cmd{"GET", "key"}));
  EXPECT_TRUE(r.error.empty());
}

TEST(RequestParser, BinarySafeArguments) {
  std::string v("a\r\n\0b", 5);
  auto r = feed("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\n" + v + "\r\n");
  ASSERT_EQ(r.commands.size(), 1u);
  EXPECT_EQ(r.commands[0][2], v);
}

TEST(RequestParser, EmptyArgument) {
  auto r = feed("*2\r\n$4\r\nECHO\r\n$0\r\n\r\n");
  ASSERT_EQ(r.commands.size(), 1u);
  EXPECT_EQ(r.commands[0], (Cmd{"ECHO", ""}));
}

TEST(RequestParser, PipelineInOneBuffer) {
  std::string in;
  for (int i = 0; i < 100; ++i) in += "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$" + std::to_string(std::to_string(i).size()) + "\r\n" + std::to_string(i) + "\r\n";
  in += "PING\r\n";
  auto r = feed(in);
  ASSERT_EQ(r.commands.size(), 101u);
  EXPECT_EQ(r.commands[42], (Cmd{"SET", "k", "42"}));
  EXPECT_EQ(r.commands[100], (Cmd{"PING"}));
}

TEST(RequestParser, EveryChunkSizeGivesTheSameCommands) {
  std::string in = "*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$11\r\nworld\r\nfoo!\r\nGET hello\r\n*1\r\n$4\r\nPING\r\n";
  auto whole = feed(in);
  ASSERT_EQ(whole.commands.size(), 3u);
  for (size_t chunk = 1; chunk < in.size(); ++chunk) {
    auto r = feed(in, chunk);
    EXPECT_EQ(r.commands, whole.commands) << "chunk " << chunk;
    EXPECT_EQ(r.consumed, in.size());
  }
}

TEST(RequestParser, NeedMoreKeepsProgressAndReportsBigArgumentSize) {
  RequestParser p;
  std::string big(100000, 'x');
  std::string in = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n" + big.substr(0, 10);
  size_t consumed = 0;
  EXPECT_EQ(p.parse(in.data(), in.size(), &consumed), Outcome::kNeedMore);
  EXPECT_TRUE(p.in_progress());
  const size_t header = in.size() - 10;
  EXPECT_EQ(p.bytes_hint(), header + 100000 + 2);
  // The rest arrives in a different buffer (moved memory).
  std::string all = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n" + big + "\r\n";
  EXPECT_EQ(p.parse(all.data(), all.size(), &consumed), Outcome::kCommand);
  EXPECT_EQ(consumed, all.size());
  ASSERT_EQ(p.args().size(), 3u);
  EXPECT_EQ(p.args()[1], "k");
  EXPECT_EQ(p.args()[2].size(), 100000u);
  EXPECT_FALSE(p.in_progress());
}

TEST(RequestParser, InlineCommands) {
  auto r = feed("SET key value\r\nGET key\nPING\r\n");
  ASSERT_EQ(r.commands.size(), 3u);
  EXPECT_EQ(r.commands[0], (Cmd{"SET", "key", "value"}));
  EXPECT_EQ(r.commands[1], (Cmd{"GET", "key"}));
  EXPECT_EQ(r.commands[2], (Cmd{"PING"}));
}

TEST(RequestParser, InlineQuotingLikeSdssplitargs) {
  auto r = feed("SET \"a b\" 'c d'\r\nECHO \"\\x41\\n\\t\"\r\nECHO 'it\\'s'\r\nECHO ab\"c d\"\r\n");
  ASSERT_EQ(r.commands.size(), 4u);
  EXPECT_EQ(r.commands[0], (Cmd{"SET", "a b", "c d"}));
  EXPECT_EQ(r.commands[1], (Cmd{"ECHO", "A\n\t"}));
  EXPECT_EQ(r.commands[2], (Cmd{"ECHO", "it's"}));
  EXPECT_EQ(r.commands[3], (Cmd{"ECHO", "abc d"}));
}

TEST(RequestParser, EmptyLinesAndEmptyMultibulkAreSkipped) {
  auto r = feed("\r\n\n   \r\n*0\r\n*-1\r\nPING\r\n");
  ASSERT_EQ(r.commands.size(), 1u);
  EXPECT_EQ(r.commands[0], (Cmd{"PING"}));
}

TEST(RequestParser, RedisErrorTexts) {
  EXPECT_EQ(feed("SET \"abc\r\n").error, "ERR Protocol error: unbalanced quotes in request");
  EXPECT_EQ(feed("SET \"a\"b\r\n").error, "ERR Protocol error: unbalanced quotes in request");
  EXPECT_EQ(feed("*x\r\n").error, "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(feed("*2\r\n$3\r\nGET\r\n:1\r\n").error, "ERR Protocol error: expected '$', got ':'");
  EXPECT_EQ(feed("*1\r\n$-1\r\n").error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(feed("*1\r\n$abc\r\n").error, "ERR Protocol error: invalid bulk length");
  EXPECT_EQ(feed("*1\r\n$01\r\n").error, "ERR Protocol error: invalid bulk length");
}

TEST(RequestParser, Limits) {
  ProtocolLimits l;
  l.max_bulk_len = 1000;
  l.max_multibulk_len = 10;
  l.max_inline_len = 100;
  EXPECT_EQ(feed("*11\r\n", SIZE_MAX, l).error, "ERR Protocol error: invalid multibulk length");
  EXPECT_TRUE(feed("*10\r\n", SIZE_MAX, l).error.empty());
  EXPECT_EQ(feed("*1\r\n$1001\r\n", SIZE_MAX, l).error, "ERR Protocol error: invalid bulk length");
  EXPECT_TRUE(feed("*1\r\n$1000\r\n", SIZE_MAX, l).error.empty());
  EXPECT_EQ(feed(std::string(101, 'a'), SIZE_MAX, l).error, "ERR Protocol error: too big inline request");
  EXPECT_EQ(feed("*" + std::string(101, '1'), SIZE_MAX, l).error, "ERR Protocol error: too big mbulk count string");
  EXPECT_EQ(feed("*1\r\n$" + std::string(101, '1'), SIZE_MAX, l).error, "ERR Protocol error: too big bulk count string");
  // Defaults are Redis': 512 MB bulk, 1024*1024 arguments, 64 KiB inline.
  ProtocolLimits d;
  EXPECT_EQ(d.max_bulk_len, 512ull << 20);
  EXPECT_EQ(d.max_multibulk_len, 1024u * 1024u);
  EXPECT_EQ(d.max_inline_len, 64u * 1024u);
  EXPECT_EQ(d.max_query_buffer, 1ull << 30);
  EXPECT_EQ(feed("*1048577\r\n").error, "ERR Protocol error: invalid multibulk length");
  EXPECT_EQ(feed("*1\r\n$536870913\r\n").error, "ERR Protocol error: invalid bulk length");
  EXPECT_TRUE(feed("*1\r\n$536870912\r\n").error.empty());
}

TEST(RequestParser, UnauthenticatedLimitsSayWhichLimit) {
  ProtocolLimits l;
  l.max_multibulk_len = 10;
  l.max_bulk_len = 16384;
  l.unauthenticated = true;
  EXPECT_EQ(feed("*11\r\n", SIZE_MAX, l).error, "ERR Protocol error: unauthenticated multibulk length");
  EXPECT_EQ(feed("*1\r\n$16385\r\n", SIZE_MAX, l).error, "ERR Protocol error: unauthenticated bulk length");
  EXPECT_EQ(feed("*1\r\n$-5\r\n", SIZE_MAX, l).error, "ERR Protocol error: invalid bulk length");
  EXPECT_TRUE(feed("*10\r\n$16384\r\n", SIZE_MAX, l).error.empty());
}

TEST(RequestParser, HugeCountDoesNotPreallocate) {
  RequestParser p;
  std::string in = "*1048576\r\n$1\r\na\r\n";
  size_t consumed;
  EXPECT_EQ(p.parse(in.data(), in.size(), &consumed), Outcome::kNeedMore);
}

// A command trickled in small pieces costs O(1) per received byte: parsing 4x the
// arguments costs about 4x the CPU time, not 16x (the parser once rebuilt the views of all
// arguments so far on every piece).  CPU time of this thread, best of several runs, and a
// bound (8x) halfway between linear and quadratic, so a loaded machine cannot flake it.
double trickle_cpu_seconds(size_t args, size_t piece) {
  std::string in = "*" + std::to_string(args) + "\r\n";
  for (size_t i = 0; i < args; ++i) in += "$1\r\nx\r\n";
  double best = 1e9;
  for (int rep = 0; rep < 7; ++rep) {
    RequestParser p;
    timespec t0{}, t1{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    size_t consumed = 0;
    Outcome o = Outcome::kNeedMore;
    for (size_t have = piece; o == Outcome::kNeedMore; have = std::min(have + piece, in.size()))
      o = p.parse(in.data(), have, &consumed);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    EXPECT_EQ(o, Outcome::kCommand);
    EXPECT_EQ(p.args().size(), args);
    EXPECT_EQ(consumed, in.size());
    best = std::min(best, static_cast<double>(t1.tv_sec - t0.tv_sec) + static_cast<double>(t1.tv_nsec - t0.tv_nsec) / 1e9);
  }
  return best;
}

TEST(RequestParser, TrickledCommandCostsLinearTime) {
  const double small = trickle_cpu_seconds(50'000, 64);
  const double big = trickle_cpu_seconds(200'000, 64);
  std::printf("trickled 50k args: %.2f ms, 200k args: %.2f ms (ratio %.2f)\n", small * 1e3, big * 1e3, big / small);
  EXPECT_LT(big, 8 * small) << "4x the arguments took " << big / small << "x the CPU time (" << small * 1e3 << " ms vs "
                            << big * 1e3 << " ms)";
}

// --- reply writer ------------------------------------------------------------------------------

std::string str(const ByteBuffer& b) { return std::string(b.data(), b.size()); }

TEST(ReplyWriter, Resp2Forms) {
  ByteBuffer b;
  ReplyWriter w(&b);
  w.ok();
  w.simple("PONG");
  w.error("ERR bad\r\nthing");
  w.integer(-42);
  w.bulk("hello");
  w.bulk("");
  w.null();
  w.null_array();
  w.array(2);
  w.map(2);
  w.set(3);
  w.dbl(1.5);
  w.dbl(HUGE_VAL);
  w.verbatim("x");
  EXPECT_EQ(str(b),
            "+OK\r\n+PONG\r\n-ERR bad  thing\r\n:-42\r\n$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*2\r\n*4\r\n*3\r\n"
            "$3\r\n1.5\r\n$3\r\ninf\r\n$1\r\nx\r\n");
}

TEST(ReplyWriter, Resp3Forms) {
  ByteBuffer b;
  ReplyWriter w(&b, RespVersion::kResp3);
  w.null();
  w.null_array();
  w.map(2);
  w.set(3);
  w.dbl(0.5);
  w.verbatim("abc");
  EXPECT_EQ(str(b), "_\r\n_\r\n%2\r\n~3\r\n,0.5\r\n=7\r\ntxt:abc\r\n");
}

TEST(ReplyWriter, LimitStopsAReplyWhileItIsBuilt) {
  ByteBuffer b;
  ReplyWriter w(&b);
  w.set_limit(100);
  w.array(3);
  w.bulk(std::string(40, 'a'));
  EXPECT_FALSE(w.failed());
  w.bulk(std::string(80, 'b'));  // would pass 100 bytes: not written
  EXPECT_TRUE(w.failed());
  EXPECT_TRUE(w.failed_over_limit());
  const size_t held = b.size();
  EXPECT_LE(held, 100u);
  w.integer(1);  // everything after a failure is dropped
  w.ok();
  w.set_limit(UINT64_MAX);  // and stays failed
  w.bulk("x");
  EXPECT_EQ(b.size(), held);
  ByteBuffer b2;
  ReplyWriter w2(&b2);
  w2.fail();  // out of memory: failed, not over the limit
  EXPECT_TRUE(w2.failed());
  EXPECT_FALSE(w2.failed_over_limit());
}

TEST(ReplyWriter, AppendCommand) {
  ByteBuffer b;
  const std::string_view args[] = {"SET", "k", "v"};
  append_command(&b, args);
  EXPECT_EQ(str(b), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n");
}

TEST(ByteBuffer, ConsumeCompactGrow) {
  ByteBuffer b;
  b.append("hello world");
  b.consume(6);
  EXPECT_EQ(std::string(b.data(), b.size()), "world");
  std::string big(100000, 'z');
  b.append(big);
  EXPECT_EQ(b.size(), 100005u);
  EXPECT_EQ(std::string(b.data(), 5), "world");
  b.consume(b.size());
  EXPECT_TRUE(b.empty());
  b.release();
  EXPECT_EQ(b.capacity(), 0u);
}

// --- replies -------------------------------------------------------------------------------------

TEST(ReplyScanner, FindsReplyBoundariesResumably) {
  const std::string replies[] = {"+OK\r\n", "-ERR x\r\n", ":12\r\n", "$3\r\nabc\r\n", "$-1\r\n", "*-1\r\n", "_\r\n",
                                 "*2\r\n$1\r\na\r\n*1\r\n:1\r\n", "%1\r\n+k\r\n+v\r\n", "~0\r\n", ",1.5\r\n", "#t\r\n",
                                 "=7\r\ntxt:abc\r\n", "|1\r\n+a\r\n+b\r\n:5\r\n", ">2\r\n+a\r\n+b\r\n", "*0\r\n"};
  std::string all;
  for (const auto& r : replies) all += r;
  for (size_t chunk = 1; chunk <= all.size(); ++chunk) {
    ReplyScanner s;
    std::string buf;
    size_t pos = 0, found = 0;
    while (pos < all.size()) {
      buf.append(all, pos, std::min(chunk, all.size() - pos));
      pos += std::min(chunk, all.size() - pos);
      for (;;) {
        const int64_t n = s.scan(buf.data(), buf.size());
        ASSERT_GE(n, 0);
        if (n == 0) break;
        EXPECT_EQ(buf.substr(0, static_cast<size_t>(n)), replies[found]) << "chunk " << chunk;
        buf.erase(0, static_cast<size_t>(n));
        ++found;
      }
    }
    EXPECT_EQ(found, std::size(replies));
  }
  ReplyScanner bad;
  EXPECT_EQ(bad.scan("?x\r\n", 4), -1);
}

TEST(ParseReply, Tree) {
  Reply r;
  const std::string s = "*3\r\n$3\r\nabc\r\n:7\r\n%1\r\n+k\r\n,2.5\r\n";
  ASSERT_TRUE(parse_reply(s.data(), s.size(), &r));
  ASSERT_EQ(r.type, ReplyType::kArray);
  ASSERT_EQ(r.elements.size(), 3u);
  EXPECT_EQ(r.elements[0].str, "abc");
  EXPECT_EQ(r.elements[1].integer, 7);
  ASSERT_EQ(r.elements[2].type, ReplyType::kMap);
  EXPECT_EQ(r.elements[2].elements[0].str, "k");
  EXPECT_DOUBLE_EQ(r.elements[2].elements[1].dbl, 2.5);
  EXPECT_FALSE(parse_reply("*2\r\n:1\r\n", 8, &r));
  const std::string v = "=7\r\ntxt:abc\r\n";
  ASSERT_TRUE(parse_reply(v.data(), v.size(), &r));
  EXPECT_EQ(r.type, ReplyType::kVerbatim);
  EXPECT_EQ(r.str, "abc");
}

TEST(ParseReply, RandomGarbageNeverCrashes) {
  std::mt19937 rng(7);
  const char alphabet[] = "*$:+-_%~=,#|>\r\n0123456789-abc";
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 40);
    for (int j = 0; j < len; ++j) s += alphabet[rng() % (sizeof alphabet - 1)];
    Reply r;
    (void)parse_reply(s.data(), s.size(), &r);
    ReplyScanner sc;
    (void)sc.scan(s.data(), s.size());
    RequestParser p;
    size_t consumed;
    (void)p.parse(s.data(), s.size(), &consumed);
  }
}

}  // namespace
}  // namespace conduit::kv
