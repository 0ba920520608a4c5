// NfqueueDelay (nfqueue_delay.h): nfnetlink_queue over a raw netlink socket.
#include "netfault/nfqueue_delay.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <future>
#include <stdexcept>
#include <vector>

#include "netfault/netlab.h"

namespace anvil::dist::test {

namespace {

using Clock = std::chrono::steady_clock;

/// Appends one netlink attribute (type, payload) to `msg`, padded to 4 bytes.
void put_attr(std::vector<char>& msg, uint16_t type, const void* data, size_t len) {
  nlattr a{};
  a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + len);
  a.nla_type = type;
  const size_t at = msg.size();
  msg.resize(at + NLA_ALIGN(a.nla_len), 0);
  std::memcpy(msg.data() + at, &a, sizeof(a));
  std::memcpy(msg.data() + at + NLA_HDRLEN, data, len);
}

/// A nfnetlink_queue message of `type` for `queue`: its headers, then `attrs`.
std::vector<char> message(uint16_t type, int queue, uint16_t flags) {
  std::vector<char> msg(NLMSG_ALIGN(sizeof(nlmsghdr)) + NLMSG_ALIGN(sizeof(nfgenmsg)), 0);
  auto* h = reinterpret_cast<nlmsghdr*>(msg.data());
  h->nlmsg_type = static_cast<uint16_t>((NFNL_SUBSYS_QUEUE << 8) | type);
  h->nlmsg_flags = static_cast<uint16_t>(NLM_F_REQUEST | flags);
  auto* g = reinterpret_cast<nfgenmsg*>(msg.data() + NLMSG_ALIGN(sizeof(nlmsghdr)));
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(static_cast<uint16_t>(queue));
  return msg;
}

void send_msg(int fd, std::vector<char> msg) {
  reinterpret_cast<nlmsghdr*>(msg.data())->nlmsg_len = static_cast<uint32_t>(msg.size());
  sockaddr_nl to{};
  to.nl_family = AF_NETLINK;
  if (::sendto(fd, msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof(to)) < 0)
    throw std::runtime_error(std::string("nfqueue: sendto failed: ") + std::strerror(errno));
}

/// Waits for the kernel's ack of the last request; throws on an error reply.
void expect_ack(int fd, const char* what) {
  std::vector<char> buf(8192);
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 2000) <= 0) throw std::runtime_error(std::string("nfqueue: no ack to ") + what);
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
  if (n < static_cast<ssize_t>(sizeof(nlmsghdr)))
    throw std::runtime_error(std::string("nfqueue: short reply to ") + what);
  const auto* h = reinterpret_cast<const nlmsghdr*>(buf.data());
  if (h->nlmsg_type == NLMSG_ERROR) {
    const auto* e = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
    if (e->error != 0)
      throw std::runtime_error(std::string("nfqueue: ") + what +
                               " refused: " + std::strerror(-e->error));
  }
}

/// A netlink socket opened inside namespace `ns` (setns on a thread of its own, which then ends:
/// the socket stays in the namespace it was created in).
int netfilter_socket_in(const std::string& ns) {
  auto made = std::async(std::launch::async, [ns] {
    const int nsfd = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) throw std::runtime_error("nfqueue: cannot open namespace " + ns);
    const int rc = ::setns(nsfd, CLONE_NEWNET);
    ::close(nsfd);
    if (rc != 0) throw std::runtime_error("nfqueue: setns(" + ns + ") failed");
    const int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    if (fd < 0) throw std::runtime_error("nfqueue: no NETLINK_NETFILTER socket");
    sockaddr_nl me{};
    me.nl_family = AF_NETLINK;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&me), sizeof(me)) != 0) {
      ::close(fd);
      throw std::runtime_error("nfqueue: bind failed");
    }
    return fd;
  });
  return made.get();
}

}  // namespace

NfqueueDelay::NfqueueDelay(const std::string& ns, int queue, std::chrono::milliseconds delay)
    : ns_(ns), queue_(queue), delay_(delay) {
  fd_ = netfilter_socket_in(ns);
  try {
    auto bind = message(NFQNL_MSG_CONFIG, queue, NLM_F_ACK);
    nfqnl_msg_config_cmd cmd{};
    cmd.command = NFQNL_CFG_CMD_BIND;
    put_attr(bind, NFQA_CFG_CMD, &cmd, sizeof(cmd));
    send_msg(fd_, bind);
    expect_ack(fd_, "binding the queue");
    auto params = message(NFQNL_MSG_CONFIG, queue, NLM_F_ACK);
    nfqnl_msg_config_params p{};
    p.copy_mode = NFQNL_COPY_META;  // ids only: the payload stays in the kernel
    put_attr(params, NFQA_CFG_PARAMS, &p, sizeof(p));
    const uint32_t flags = htonl(NFQA_CFG_F_FAIL_OPEN), mask = htonl(NFQA_CFG_F_FAIL_OPEN);
    put_attr(params, NFQA_CFG_FLAGS, &flags, sizeof(flags));  // a full queue lets packets pass
    put_attr(params, NFQA_CFG_MASK, &mask, sizeof(mask));
    send_msg(fd_, params);
    expect_ack(fd_, "setting the copy mode");
    // nftables' own `queue` needs CONFIG_NFT_QUEUE; where the kernel lacks it, iptables' NFQUEUE
    // target (xtables, also under iptables-nft) does the same.
    try {
      sh("ip netns exec " + ns + " nft -f - <<'EOF'\ntable inet anvil_delay {\n  chain out { " +
         "type filter hook output priority 0; oifname \"eth0\" queue num " + std::to_string(queue) +
         " bypass; }\n}\nEOF");
      rule_ = "nft";
    } catch (const std::exception& nft_error) {
      try {
        sh("ip netns exec " + ns + " iptables -A OUTPUT " + iptables_rule());
        rule_ = "iptables";
      } catch (const std::exception& e) {
        throw std::runtime_error(std::string("nfqueue: no rule could queue the packets: ") +
                                 nft_error.what() + "\n" + e.what());
      }
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
  thread_ = std::thread([this] { loop(); });
}

NfqueueDelay::~NfqueueDelay() {
  try {
    if (rule_ == "nft") sh("ip netns exec " + ns_ + " nft delete table inet anvil_delay");
    if (rule_ == "iptables") sh("ip netns exec " + ns_ + " iptables -D OUTPUT " + iptables_rule());
  } catch (...) {  // the namespace may be gone already
  }
  stop_ = true;
  thread_.join();
  ::close(fd_);
}

std::string NfqueueDelay::iptables_rule() const {
  return "-o eth0 -j NFQUEUE --queue-num " + std::to_string(queue_) + " --queue-bypass";
}

void NfqueueDelay::loop() {
  struct Held {
    uint32_t id;
    Clock::time_point due;
  };
  std::deque<Held> held;
  std::vector<char> buf(1 << 16);
  auto accept = [&](uint32_t id) {
    auto v = message(NFQNL_MSG_VERDICT, queue_, 0);
    nfqnl_msg_verdict_hdr vh{};
    vh.verdict = htonl(NF_ACCEPT);
    vh.id = htonl(id);
    put_attr(v, NFQA_VERDICT_HDR, &vh, sizeof(vh));
    try {
      send_msg(fd_, v);
    } catch (...) {
    }
  };
  while (!stop_ || !held.empty()) {
    if (stop_) {  // the rule is gone: let everything held go now
      for (const auto& h : held) accept(h.id);
      held.clear();
      break;
    }
    int wait_ms = 20;
    if (!held.empty())
      wait_ms = static_cast<int>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(held.front().due - Clock::now())
                 .count()));
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, std::min(wait_ms, 20)) > 0) {
      ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); n > 0 && NLMSG_OK(h, n);
           h = NLMSG_NEXT(h, n)) {
        if ((h->nlmsg_type & 0xff) != NFQNL_MSG_PACKET) continue;
        auto* a = reinterpret_cast<nlattr*>(static_cast<char*>(NLMSG_DATA(h)) +
                                            NLMSG_ALIGN(sizeof(nfgenmsg)));
        int left = static_cast<int>(h->nlmsg_len) - NLMSG_HDRLEN - NLMSG_ALIGN(sizeof(nfgenmsg));
        while (left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left) {
          if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
            nfqnl_msg_packet_hdr ph{};
            std::memcpy(&ph, reinterpret_cast<char*>(a) + NLA_HDRLEN, sizeof(ph));
            held.push_back({ntohl(ph.packet_id), Clock::now() + delay_});
            ++packets_;
          }
          left -= NLA_ALIGN(a->nla_len);
          a = reinterpret_cast<nlattr*>(reinterpret_cast<char*>(a) + NLA_ALIGN(a->nla_len));
        }
      }
    }
    const auto now = Clock::now();
    while (!held.empty() && held.front().due <= now) {
      accept(held.front().id);
      held.pop_front();
    }
  }
}

}  // namespace anvil::dist::test
