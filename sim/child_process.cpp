#include "sim/child_process.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/input_error.hpp"

namespace osdp::sim {
namespace {

void write_all(int fd, const std::string& text) {
  std::size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    written += static_cast<std::size_t>(n);
  }
}

// The text written to `fd` until it closes; nullopt once `deadline` passes first.
std::optional<std::string> read_all(int fd, Deadline deadline) {
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd readable{fd, POLLIN, 0};
      const int ready = ::poll(
          &readable, 1, static_cast<int>(std::min<long long>(left.count(), 1000LL * 60 * 60)));
      if (ready < 0 && errno != EINTR) return std::nullopt;
      if (ready <= 0) continue;
    }
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
};

Child start_child(const std::function<std::string()>& body) {
  int fds[2];
  if (::pipe(fds) != 0) {
    throw std::runtime_error(fmt::format("sim: pipe: {}", std::strerror(errno)));
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(fmt::format("sim: fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    // The parent's handlers (a test framework's, say) must not report the child's crash.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT}) {
      std::signal(sig, SIG_DFL);
    }
    nlohmann::json reply;
    try {
      reply = {{"ok", body()}};
    } catch (const InputError& error) {
      reply = {{"input_error", {error.file(), error.json_path(), error.value(), error.expected()}}};
    } catch (const std::exception& error) {
      reply = {{"error", error.what()}};
    }
    write_all(fds[1], reply.dump());
    ::close(fds[1]);
    std::fflush(nullptr);
    ::_exit(0);  // no atexit handlers or destructors of the parent's state
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

// Reads the child's reply to the end, reaps it, and decodes the reply.
std::string finish_child(const Child& child, Deadline deadline = {}) {
  const std::optional<std::string> reply_text = read_all(child.fd, deadline);
  if (!reply_text) ::kill(child.pid, SIGKILL);
  ::close(child.fd);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!reply_text) throw DeadlinePassed();
  const std::string& text = *reply_text;
  if (WIFSIGNALED(status)) {
    throw std::runtime_error(
        fmt::format("sim: the simulation process died of signal {}", WTERMSIG(status)));
  }
  const auto reply = nlohmann::json::parse(text, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) {
    throw std::runtime_error("sim: the simulation process gave no result");
  }
  if (reply.contains("ok")) return reply["ok"].get<std::string>();
  if (reply.contains("input_error")) {
    const auto& e = reply["input_error"];
    throw InputError(e[0].get<std::string>(), e[1].get<std::string>(), e[2].get<std::string>(),
                     e[3].get<std::string>());
  }
  throw std::runtime_error(reply.value("error", std::string("sim: unknown failure")));
}

}  // namespace

std::string run_in_child(const std::function<std::string()>& body, Deadline deadline) {
  return finish_child(start_child(body), deadline);
}

std::vector<std::string> run_in_children(const std::vector<std::function<std::string()>>& bodies,
                                         int parallelism) {
  const std::size_t window = static_cast<std::size_t>(std::max(1, parallelism));
  std::vector<std::string> replies(bodies.size());
  std::deque<std::pair<std::size_t, Child>> running;
  std::exception_ptr first_error;
  std::size_t next = 0;
  // Children finish in start order; a child whose reply is not yet read waits on its pipe.
  while (next < bodies.size() || !running.empty()) {
    while (next < bodies.size() && running.size() < window && !first_error) {
      try {
        running.emplace_back(next, start_child(bodies[next]));
      } catch (...) {
        first_error = std::current_exception();
      }
      ++next;
    }
    if (running.empty()) break;
    const auto [index, child] = running.front();
    running.pop_front();
    try {
      replies[index] = finish_child(child);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  }
  if (first_error) std::rethrow_exception(first_error);
  return replies;
}

}  // namespace osdp::sim
