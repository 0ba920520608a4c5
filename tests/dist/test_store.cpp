// Stores (in one process; threads play the ranks): HashStore, FileStore, PrefixStore, TCPStore
// (server hosted in-process or standalone), the gloo rendezvous adapter and store_barrier.
// Every blocking call is bounded; timeouts must name the key(s) and the timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <thread>

#include "dist/store.h"
#include "dist/tcp_store.h"
#include "dist_check.h"
#ifdef ANVIL_HAVE_GLOO
#include "dist/gloo/gloo_store.h"
#endif

namespace anvil::dist::test {
namespace {

using std::chrono::milliseconds;

/// The contract every store honours.
void exercise(const std::shared_ptr<Store>& s, const std::string& name) {
  SCOPED_TRACE(name);
  s->set("a", "hello");
  s->set("bin", std::string("x\0y", 3));
  EXPECT_EQ(s->get("a"), "hello");
  EXPECT_EQ(s->get("bin"), std::string("x\0y", 3));
  s->set("a", "again");
  EXPECT_EQ(s->get("a"), "again");
  EXPECT_EQ(s->add("n", 5), 5);
  EXPECT_EQ(s->add("n", -2), 3);
  EXPECT_EQ(s->get("n"), "3");
  EXPECT_TRUE(s->check({"a", "n"}));
  EXPECT_FALSE(s->check({"a", "missing"}));
  const int64_t keys = s->num_keys();
  EXPECT_GE(keys, 3);
  EXPECT_TRUE(s->delete_key("a"));
  EXPECT_FALSE(s->delete_key("a"));
  EXPECT_EQ(s->num_keys(), keys - 1);
  // A blocking get is satisfied by a later set from another thread.
  auto later = std::async(std::launch::async, [s] {
    std::this_thread::sleep_for(milliseconds(50));
    s->set("late", "arrived");
  });
  EXPECT_EQ(s->get("late"), "arrived");
  later.get();
  // Concurrent adds are atomic.
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([s] {
      for (int i = 0; i < 25; ++i) s->add("counter", 1);
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(s->add("counter", 0), 100);
  // Timeouts name the missing keys and the timeout.
  EXPECT_TRUE(throws_error(
      [&] {
        s->wait({"late", "never"}, milliseconds(100));
      },
      {"timed out after 100 ms", "never'"}));
  const Millis old = s->timeout();
  s->set_timeout(milliseconds(80));
  EXPECT_TRUE(throws_error([&] { s->get("nobody-sets-this"); },
                           {"timed out after 80 ms", "nobody-sets-this'"}));
  s->set_timeout(old);
  EXPECT_TRUE(throws_error([&] { s->set("bad", "x"), s->add("bad", 1); }, {"not an integer"}));
}

TEST(Store, HashStore) { exercise(std::make_shared<HashStore>(), "HashStore"); }

TEST(Store, FileStore) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("anvil_filestore_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  exercise(std::make_shared<FileStore>(dir.string()), "FileStore");
  // A second FileStore on the same directory (another "process") sees the same keys.
  FileStore other(dir.string());
  EXPECT_EQ(other.get("late"), "arrived");
  EXPECT_EQ(other.add("counter", 1), 101);
  std::filesystem::remove_all(dir);
}

TEST(Store, PrefixStore) {
  auto base = std::make_shared<HashStore>();
  auto p = std::make_shared<PrefixStore>("group/1", base);
  exercise(p, "PrefixStore");
  EXPECT_EQ(base->get("group/1/n"), "3");
  EXPECT_FALSE(base->check({"n"}));
  auto q = std::make_shared<PrefixStore>("group/2", base);
  q->set("n", "other");
  EXPECT_EQ(p->get("n"), "3");
  EXPECT_TRUE(throws_error([&] { p->wait({"x"}, milliseconds(30)); }, {"'group/1/x'"}));
}

TEST(Store, TCPStoreHostedByRankZero) {
  auto server = std::make_shared<TCPStore>("127.0.0.1", 0, true, milliseconds(10000));
  ASSERT_GT(server->port(), 0);
  exercise(server, "TCPStore server");
  // Clients in other threads see the same data; a long wait in one thread never blocks another
  // thread's set (each call uses its own connection).
  auto client = std::make_shared<TCPStore>("localhost", server->port(), false, milliseconds(10000));
  EXPECT_EQ(client->get("late"), "arrived");
  auto waiter = std::async(std::launch::async, [client] { return client->get("from-other"); });
  std::this_thread::sleep_for(milliseconds(30));
  client->set("from-other", "value");
  EXPECT_EQ(waiter.get(), "value");
  // After a client-side timeout the client still works (fresh connection).
  EXPECT_TRUE(throws_error([&] { client->wait({"never"}, milliseconds(50)); },
                           {"TCPStore(localhost:", "timed out after 50 ms", "'never'"}));
  EXPECT_EQ(client->get("from-other"), "value");
  EXPECT_EQ(client->add("counter", 1), 101);
}

TEST(Store, TCPStoreStandaloneServer) {
  TCPStoreServer server;
  std::vector<std::future<int64_t>> ranks;
  for (int r = 0; r < 4; ++r)
    ranks.push_back(std::async(std::launch::async, [&server, r] {
      TCPStore s("127.0.0.1", server.port(), false, milliseconds(10000));
      s.set("addr/" + std::to_string(r), "rank" + std::to_string(r));
      s.wait({"addr/0", "addr/1", "addr/2", "addr/3"});
      store_barrier(s, "b", r, 4, milliseconds(10000));
      return s.add("joined", 1);
    }));
  int64_t max = 0;
  for (auto& f : ranks) max = std::max(max, f.get());
  EXPECT_EQ(max, 4);
  // A second server on the same port is refused with a clear error.
  EXPECT_TRUE(throws_error([&] { TCPStoreServer again(server.port()); },
                           {"cannot listen on port", std::to_string(server.port())}));
}

TEST(Store, TCPStoreConnectFailureNamesTheAddress) {
  int port;
  {
    TCPStoreServer s;  // a port that was free, now closed again
    port = s.port();
  }
  EXPECT_TRUE(throws_error(
      [&] { TCPStore c("127.0.0.1", port, false, milliseconds(150)); },
      {"could not connect within 150 ms", str("TCPStore(127.0.0.1:", port, ")"), "MASTER_PORT"}));
}

TEST(Store, TCPStoreServerGoneIsNamed) {
  auto server = std::make_unique<TCPStoreServer>();
  TCPStore client("127.0.0.1", server->port(), false, milliseconds(20000));
  auto waiter = std::async(std::launch::async, [&] { client.wait({"never"}); });
  std::this_thread::sleep_for(milliseconds(50));
  server->stop();  // rank 0 went away
  EXPECT_TRUE(throws_error([&] { waiter.get(); },
                           {"lost the connection to the store server", "'never'"}));
}

// A server that accepts connections (the kernel's backlog) but never answers, like a store host
// that froze: a wait times out after its timeout, plus at most the bounded check of which keys
// are missing (before, each key's check waited 2 s for a reply that never came).
TEST(Store, TCPStoreTimeoutAgainstAFrozenServerIsBounded) {
  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(lfd, 64), 0);
  ASSERT_EQ(::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  TCPStore c("127.0.0.1", port, false, milliseconds(300));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(throws_error(
      [&] {
        c.wait({"k1", "k2", "k3"}, milliseconds(300));
      },
      {"timed out after 300 ms", "'k1', 'k2', 'k3'"}));
  const auto ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_LT(ms.count(), 300 + 250 + 500) << "the timeout error came " << ms.count() << " ms late";
  EXPECT_TRUE(throws_error([&] { c.set("x", "1"); }, {"set('x') got no reply within 300 ms"}));
  ::close(lfd);
}

// Once the server is gone, a call that needs a new connection names itself and the keys.
TEST(Store, TCPStoreCallsAfterTheServerLeftNameThemselves) {
  auto server = std::make_unique<TCPStoreServer>();
  TCPStore client("127.0.0.1", server->port(), false, milliseconds(200));
  client.set("a", "1");
  server->stop();
  server.reset();
  // The pooled connection is dead; whichever call meets the refused connect names itself.
  for (int i = 0; i < 2; ++i) {
    try {
      client.set("k", "v");
    } catch (const Error&) {
    }
  }
  EXPECT_TRUE(throws_error([&] { client.set("k2", "v"); },
                           {"set('k2'): could not connect within 200 ms", "TCPStore(127.0.0.1:"}));
  EXPECT_TRUE(throws_error(
      [&] {
        client.wait({"w1", "w2"}, milliseconds(200));
      },
      {"waiting for key(s) 'w1', 'w2': could not connect"}));
}

TEST(Store, StoreBarrierReleasesRankZeroLast) {
  auto s = std::make_shared<HashStore>();
  std::atomic<int> departed{0};
  std::vector<std::thread> th;
  std::atomic<bool> zero_saw_all{false};
  for (int r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      store_barrier(*s, "bar", r, 3, milliseconds(5000));
      if (r == 0) zero_saw_all = s->get("bar/departed") == "3";
      ++departed;
    });
  for (auto& t : th) t.join();
  EXPECT_TRUE(zero_saw_all);
  EXPECT_TRUE(throws_error([&] { store_barrier(*s, "lonely", 0, 2, milliseconds(50)); },
                           {"'lonely/all_arrived'"}));
}

#ifdef ANVIL_HAVE_GLOO
TEST(Store, GlooAdapter) {
  auto base = std::make_shared<HashStore>(milliseconds(60));
  GlooStore g(base);
  g.set("k", {'a', 'b'});
  EXPECT_EQ(g.get("k"), (std::vector<char>{'a', 'b'}));
  g.wait({"k"});
  g.wait({"k"}, milliseconds(10));
  EXPECT_TRUE(throws_error([&] { g.wait({"gone"}); }, {"timed out after 60 ms", "'gone'"}));
  EXPECT_TRUE(throws_error([&] { g.get("gone"); }, {"'gone'"}));
}
#endif

}  // namespace
}  // namespace anvil::dist::test
