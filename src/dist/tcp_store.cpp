// TCPStore client and server (protocol in tcp_store.h).
#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <thread>

#include "core/error.h"
#include "dist/tcp_store_protocol.h"

namespace anvil::dist {

namespace {

using Clock = std::chrono::steady_clock;

/// Milliseconds left until `deadline` (0 when passed), as poll() wants them.
int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

/// Set by send_all / recv_exact when they gave up because the deadline passed (not an error).
thread_local bool t_timed_out = false;

/// Writes all of `data` before `deadline`; false on error or timeout.
bool send_all(int fd, const std::string& data, Clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t k = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (k > 0) {
      done += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, ms_left(deadline));
      if (r == 0) t_timed_out = true;
      if (r <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

/// Reads exactly `n` bytes before `deadline`; false on error, EOF or timeout.
bool recv_exact(int fd, char* out, size_t n, Clock::time_point deadline) {
  size_t done = 0;
  while (done < n) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0 && Clock::now() < deadline) continue;  // poll rounds to whole milliseconds
    if (r == 0) t_timed_out = true;
    if (r <= 0) return false;
    const ssize_t k = ::recv(fd, out + done, n - done, 0);
    if (k > 0) {
      done += static_cast<size_t>(k);
    } else if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    } else {
      return false;
    }
  }
  return true;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Server

/// The server's connections and its protocol state, touched only by the serving thread.
struct TCPStoreServer::State {
  std::set<int> clients;  // connected sockets
  TcpStoreServerCore core{[](int fd, const std::string& frame) {
    send_all(fd, frame, Clock::now() + std::chrono::seconds(30));
  }};

  void drop(int fd) {
    ::close(fd);
    clients.erase(fd);
    core.drop(fd);
  }
};

TCPStoreServer::TCPStoreServer(int port) : state_(std::make_unique<State>()) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw Error("cannot create a socket", "TCPStoreServer", "", strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 1024) != 0) {
    const std::string why = strerror(errno);
    ::close(listen_fd_);
    throw Error(str("cannot listen on port ", port), "TCPStoreServer", "a free TCP port", why);
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw Error("cannot create a pipe", "TCPStoreServer", "", strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

TCPStoreServer::~TCPStoreServer() { stop(); }

void TCPStoreServer::stop() {
  if (stopped_.exchange(true)) return;
  const char c = 'x';
  [[maybe_unused]] ssize_t k = ::write(wake_pipe_[1], &c, 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : state_->clients) ::close(fd);
  state_->clients.clear();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void TCPStoreServer::serve() {
  State& st = *state_;
  std::vector<pollfd> fds;
  std::vector<char> buf(1 << 16);
  while (true) {
    fds.clear();
    fds.push_back({wake_pipe_[0], POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (int fd : st.clients) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        set_nodelay(fd);
        st.clients.insert(fd);
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int fd = fds[i].fd;
      const ssize_t k = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (k <= 0) {
        st.drop(fd);
        continue;
      }
      if (!st.core.receive(fd, buf.data(), static_cast<size_t>(k))) st.drop(fd);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Client

TCPStore::TCPStore(std::string host, int port, bool is_server, Millis timeout)
    : Store(timeout), host_(std::move(host)), port_(port) {
  if (is_server) {
    server_ = std::make_unique<TCPStoreServer>(port);
    port_ = server_->port();
  }
  release(acquire(timeout));  // fail early, with a clear message, when nobody listens
}

TCPStore::~TCPStore() {
  for (int fd : idle_) ::close(fd);
  idle_.clear();
  if (server_) server_->stop();
}

std::string TCPStore::describe() const { return str("TCPStore(", host_, ":", port_, ")"); }

int TCPStore::acquire(Millis timeout) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!idle_.empty()) {
      const int fd = idle_.back();
      idle_.pop_back();
      return fd;
    }
  }
  const auto deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error = "no attempt";
  auto sleep = Millis(5);
  while (true) {
    addrinfo* res = nullptr;
    const int gai = ::getaddrinfo(host_.c_str(), std::to_string(port_).c_str(), &hints, &res);
    if (gai != 0) {
      last_error = str("cannot resolve '", host_, "': ", gai_strerror(gai));
    } else {
      for (addrinfo* a = res; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(res);
          set_nodelay(fd);
          return fd;
        }
        last_error = strerror(errno);
        ::close(fd);
      }
      ::freeaddrinfo(res);
    }
    if (Clock::now() + sleep >= deadline)
      throw Error(str("could not connect within ", timeout.count(),
                      " ms (is rank 0 / the store server running, and are MASTER_ADDR and "
                      "MASTER_PORT right?)"),
                  describe(), "a listening TCPStoreServer", last_error);
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, Millis(200));
  }
}

void TCPStore::release(int fd) {
  std::lock_guard<std::mutex> lk(mu_);
  idle_.push_back(fd);
}

bool TCPStore::request(TcpStoreCmd cmd, const std::vector<std::string>& args, Millis timeout,
                       Reply& reply) {
  const auto deadline = Clock::now() + timeout;
  const int fd = acquire(timeout);
  t_timed_out = false;
  uint32_t n = 0;
  std::vector<char> body;
  bool ok = send_all(fd, tcp_store_encode(static_cast<uint8_t>(cmd), args), deadline) &&
            recv_exact(fd, reinterpret_cast<char*>(&n), 4, deadline) && n <= kTcpStoreMaxFrame;
  if (ok) {
    body.resize(n);
    ok = recv_exact(fd, body.data(), n, deadline) &&
         tcp_store_decode(body.data(), n, reply.code, reply.values);
  }
  if (!ok) {
    ::close(fd);  // the server drops this connection's parked request with it
    return false;
  }
  release(fd);
  return true;
}

TCPStore::Reply TCPStore::call(TcpStoreCmd cmd, const std::vector<std::string>& args,
                               const std::string& what) {
  Reply r;
  bool answered = false;
  try {
    answered = request(cmd, args, timeout(), r);
  } catch (const Error& e) {  // no connection: say which call could not be made
    throw Error(str(what, ": ", e.what_part()), e.where(), e.expected(), e.actual());
  }
  if (!answered)
    throw Error(str(what, " got no reply within ", timeout().count(), " ms"), describe(),
                "a reply from the store server", "connection lost or timed out");
  if (r.code == 2)
    throw Error(r.values.empty() ? "store error" : r.values[0], describe() + " " + what);
  return r;
}

void TCPStore::set(const std::string& key, const std::string& value) {
  call(TcpStoreCmd::kSet, {key, value}, str("set('", key, "')"));
}

std::string TCPStore::get(const std::string& key) {
  wait({key}, timeout());
  return get_now(key);
}

std::string TCPStore::get_now(const std::string& key) {
  Reply r = call(TcpStoreCmd::kGet, {key}, str("get('", key, "')"));
  if (r.code == 1 || r.values.size() != 1)
    throw Error("key not found", describe(), str("key '", key, "'"), "absent");
  return r.values[0];
}

int64_t TCPStore::add(const std::string& key, int64_t delta) {
  Reply r = call(TcpStoreCmd::kAdd, {key, std::to_string(delta)}, str("add('", key, "')"));
  return parse_counter(key, r.values.empty() ? "" : r.values[0]);
}

bool TCPStore::check(const std::vector<std::string>& keys) {
  Reply r = call(TcpStoreCmd::kCheck, keys, "check");
  return !r.values.empty() && r.values[0] == "1";
}

void TCPStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  Reply r;
  const auto deadline = Clock::now() + timeout;
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "'" : ", '") + k + "'";
  bool answered = false;
  try {
    answered = request(TcpStoreCmd::kWait, keys, timeout, r);
  } catch (const Error& e) {  // no connection: name the keys it was to wait for
    throw Error(str("waiting for key(s) ", names, ": ", e.what_part()), e.where(), e.expected(),
                e.actual());
  }
  if (answered) {
    if (r.code == 2) throw Error(r.values.empty() ? "store error" : r.values[0], describe());
    return;
  }
  if (!t_timed_out && Clock::now() < deadline) {
    throw Error(str("lost the connection to the store server while waiting for key(s) ", names,
                    " (did rank 0, which hosts it, exit or crash?)"),
                describe(), "a reply from the store server", "connection closed");
  }
  // Timed out: name exactly the keys still missing (best effort, on a fresh connection, and
  // within kMissingCheck in all: a server that went away meanwhile must neither delay the
  // timeout error by a connect timeout per key nor replace it with a connect error).
  constexpr Millis kMissingCheck{250};
  const auto check_end = Clock::now() + kMissingCheck;
  std::vector<std::string> missing;
  for (const auto& k : keys) {
    Reply c;
    bool present = false;
    try {
      const auto left = std::chrono::duration_cast<Millis>(check_end - Clock::now());
      present = left.count() > 0 && request(TcpStoreCmd::kCheck, {k}, left, c) &&
                !c.values.empty() && c.values[0] == "1";
    } catch (const Error&) {
    }
    if (!present) missing.push_back(k);
  }
  throw_store_timeout(describe(), missing.empty() ? keys : missing, timeout);
}

bool TCPStore::delete_key(const std::string& key) {
  Reply r = call(TcpStoreCmd::kDelete, {key}, str("delete_key('", key, "')"));
  return !r.values.empty() && r.values[0] == "1";
}

int64_t TCPStore::num_keys() {
  Reply r = call(TcpStoreCmd::kNumKeys, {}, "num_keys");
  return parse_counter("num_keys", r.values.empty() ? "" : r.values[0]);
}

}  // namespace anvil::dist
