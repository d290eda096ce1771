#include "algos/distributed.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <utility>

#include "core/error.h"

#ifndef USE_C10D_GLOO
#error "distributed.cpp needs USE_C10D_GLOO (set in CMakeLists.txt) to see ProcessGroupGloo"
#endif

namespace qforge::algos {

namespace {

std::string formatSeconds(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

// The first line of an exception's message: c10::Error appends a C++ backtrace, and qforge's
// errors are one line.
std::string firstLine(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string message = c10_error ? c10_error->what_without_backtrace() : e.what();
  const size_t newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  return message;
}

bool parsePort(const std::string& text, int& port) {
  if (text.empty() || text.size() > 5) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  port = std::stoi(text);
  return true;
}

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

// The master is on this machine for every rank: gloo then binds the loopback address too, which
// works without a resolvable hostname or network interface (tests, one machine with several ranks).
bool isLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::shared_ptr<::gloo::transport::Device> createGlooDevice(const std::string& master_host) {
  if (isLoopback(master_host)) return c10d::ProcessGroupGloo::createDeviceForHostname(master_host);
  // Across machines each rank binds its own address: the interface named by GLOO_SOCKET_IFNAME
  // (PyTorch's variable, for machines with several networks), else its hostname's address.
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface)
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

MasterAddress parseMasterAddress(const std::string& master) {
  const std::string expected =
      "--master must be ADDR:PORT with PORT in 1..65535 (e.g. 127.0.0.1:29500), got '" + master +
      "'";
  const size_t colon = master.rfind(':');
  require(colon != std::string::npos, expected);
  MasterAddress address;
  address.host = master.substr(0, colon);
  if (address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']')
    address.host = address.host.substr(1, address.host.size() - 2);
  require(!address.host.empty(), expected);
  require(parsePort(master.substr(colon + 1), address.port), expected);
  require(address.port >= 1 && address.port <= 65535, expected);
  return address;
}

void validateDistributedOptions(const DistributedOptions& options) {
  require(options.world_size >= 1,
          "--world-size must be at least 1, got " + std::to_string(options.world_size));
  require(options.rank >= 0 && options.rank < options.world_size,
          "--rank must be in [0, " + std::to_string(options.world_size) + ") for --world-size " +
              std::to_string(options.world_size) + ", got " + std::to_string(options.rank));
  require(options.timeout_seconds > 0 && std::isfinite(options.timeout_seconds),
          "the distributed timeout must be a positive number of seconds, got " +
              formatSeconds(options.timeout_seconds));
  if (options.world_size > 1) parseMasterAddress(options.master);
}

// Waits for a collective by polling rather than sleeping on a condition variable: a collective of
// a reconstruction step takes a fraction of a millisecond, and waking a sleeping thread (on a
// virtual machine, a halted vCPU) cost 2-5 ms of it. wait() then rethrows what the collective
// failed with, its own timeout included.
void waitFor(const c10::intrusive_ptr<c10d::Work>& work) {
  while (!work->isCompleted())
    std::this_thread::yield();
  work->wait();
}

struct ProcessGroup::Connection {
  std::string who;  // "rank 1 of 2", the start of every message
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;  // declared after the store: destroyed first

  // Runs one c10d call, turning whatever c10d or gloo throws (c10::Error, gloo::IoException, ...)
  // into a one-line qforge::Error that names the rank and the operation.
  template <typename Call>
  auto guarded(const std::string& operation, Call&& call) {
    try {
      return call();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      // Most often another rank stopped on an error of its own, which its output names.
      throw Error(who + ": " + operation + " failed: " + firstLine(e) +
                  "; if another rank stopped first, its own error says why");
    }
  }

  // Reduces `tensor` in place across the ranks, waiting for the result.
  void allReduce(const at::Tensor& tensor, c10d::ReduceOp op, const std::string& operation) {
    guarded(operation, [&] {
      std::vector<at::Tensor> one{tensor};
      c10d::AllreduceOptions reduce;
      reduce.reduceOp = op;
      waitFor(group->allreduce(one, reduce));
    });
  }
};

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds remainingUntil(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

// After connecting to the store: checks that every rank agrees on the world size and that no two
// processes claim the same rank, then waits until all world_size ranks have arrived.
void joinAllRanks(c10d::Store& store, const DistributedOptions& options, const std::string& who,
                  Clock::time_point deadline) {
  const std::string advice = "; start every rank with the same --master and --world-size";
  const std::string world_size = std::to_string(options.world_size);
  const std::vector<uint8_t> agreed = store.compareSet("qforge/world_size", {}, bytes(world_size));
  if (agreed != bytes(world_size))
    throw Error(who + ": another rank joined the master " + options.master + " with --world-size " +
                std::string(agreed.begin(), agreed.end()) + advice);
  // A token only this process writes: a second process with the same --rank reads back the first's.
  const std::string token = std::to_string(static_cast<long long>(::getpid())) + "@" +
                            std::to_string(Clock::now().time_since_epoch().count());
  const std::string rank_key = "qforge/rank/" + std::to_string(options.rank);
  if (store.compareSet(rank_key, {}, bytes(token)) != bytes(token))
    throw Error(who + ": another process already joined the master " + options.master +
                " as rank " + std::to_string(options.rank) + "; give every process its own --rank");
  if (store.add("qforge/joined", 1) == options.world_size)
    store.set("qforge/all_joined", bytes("1"));
  try {
    store.wait({"qforge/all_joined"}, remainingUntil(deadline));
  } catch (const std::exception&) {
    const int64_t joined = store.add("qforge/joined", 0);
    throw Error(who + ": only " + std::to_string(joined) + " of " + world_size +
                " ranks reached the master " + options.master + " within " +
                formatSeconds(options.timeout_seconds) + " s" + advice);
  }
}

}  // namespace

ProcessGroup::ProcessGroup(const DistributedOptions& options)
    : rank_(options.rank), world_size_(options.world_size) {
  validateDistributedOptions(options);
  if (world_size_ == 1) return;

  const MasterAddress master = parseMasterAddress(options.master);
  const auto timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::llround(options.timeout_seconds * 1000)));
  const Clock::time_point deadline = Clock::now() + timeout;
  auto connection = std::make_unique<Connection>();
  connection->who = "rank " + std::to_string(rank_) + " of " + std::to_string(world_size_);
  const std::string& who = connection->who;

  // Rank 0 hosts the store; the others retry connecting to it until the timeout.
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(master.port);
    store_options.isServer = rank_ == 0;
    store_options.numWorkers = static_cast<size_t>(world_size_);
    store_options.waitWorkers = false;  // joinAllRanks waits, with a message that counts ranks
    store_options.timeout = timeout;
    connection->store = c10::make_intrusive<c10d::TCPStore>(master.host, store_options);
  } catch (const std::exception& e) {
    if (rank_ == 0)
      throw Error(who + " could not host the master on " + options.master +
                  " (is the port in use?): " + firstLine(e));
    throw Error(who + " could not reach the master " + options.master + " within " +
                formatSeconds(options.timeout_seconds) +
                " s; start every rank with the same --master and --world-size (" + firstLine(e) +
                ")");
  }

  connection->guarded("joining the master " + options.master,
                      [&] { joinAllRanks(*connection->store, options, who, deadline); });

  connection->group = connection->guarded("connecting to the other ranks through gloo", [&] {
    auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo_options->devices.push_back(createGlooDevice(master.host));
    gloo_options->threads = 1;  // calls are synchronous: one collective in flight at a time
    // gloo's rendezvous keys under their own prefix, apart from joinAllRanks's.
    auto gloo_store = c10::make_intrusive<c10d::PrefixStore>("gloo", connection->store);
    return c10::make_intrusive<c10d::ProcessGroupGloo>(gloo_store, rank_, world_size_,
                                                       gloo_options);
  });
  connection_ = std::move(connection);
}

ProcessGroup::~ProcessGroup() = default;

namespace {

void checkTensors(const std::vector<at::Tensor>& tensors, const std::string& operation,
                  bool floating_only) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    const std::string which =
        operation + ": tensor " + std::to_string(i) + " of " + std::to_string(tensors.size());
    require(t.defined(), which +
                             " is undefined (a parameter without a gradient? give it a zero "
                             "gradient so that every rank sends the same tensors)");
    require(t.device().is_cpu() && t.layout() == at::kStrided,
            which + " must be a dense CPU tensor");
    require(!floating_only || at::isFloatingType(t.scalar_type()),
            which + " must be floating point, got " + std::string(at::toString(t.scalar_type())));
  }
}

// The tensors of one dtype, by their index in the caller's list.
std::vector<std::vector<size_t>> groupByDtype(const std::vector<at::Tensor>& tensors) {
  std::vector<std::vector<size_t>> groups;
  std::vector<at::ScalarType> dtypes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto found = std::find(dtypes.begin(), dtypes.end(), tensors[i].scalar_type());
    if (found == dtypes.end()) {
      dtypes.push_back(tensors[i].scalar_type());
      groups.push_back({i});
    } else {
      groups[found - dtypes.begin()].push_back(i);
    }
  }
  return groups;
}

// Runs `collective` on one contiguous buffer per dtype holding the tensors' values, then writes the
// results back. A lone contiguous tensor is its own buffer (no copies).
template <typename Collective>
void throughFlatBuffers(const std::vector<at::Tensor>& tensors, Collective&& collective) {
  at::NoGradGuard no_grad;  // parameters that require grad are written in place
  for (const std::vector<size_t>& group : groupByDtype(tensors)) {
    if (group.size() == 1 && tensors[group[0]].is_contiguous()) {
      collective(tensors[group[0]]);
      continue;
    }
    std::vector<at::Tensor> flat;
    for (size_t i : group)
      flat.push_back(tensors[i].reshape({-1}));
    at::Tensor buffer = at::cat(flat);
    collective(buffer);
    int64_t offset = 0;
    for (size_t i : group) {
      const at::Tensor& t = tensors[i];
      t.copy_(buffer.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

}  // namespace

void ProcessGroup::allReduceSum(const std::vector<at::Tensor>& tensors) {
  checkTensors(tensors, "all-reduce (sum)", false);
  if (!connection_) return;
  throughFlatBuffers(tensors, [&](const at::Tensor& buffer) {
    connection_->allReduce(buffer, c10d::ReduceOp::SUM, "all-reduce (sum)");
  });
}

void ProcessGroup::allReduceMean(const std::vector<at::Tensor>& tensors) {
  checkTensors(tensors, "all-reduce (mean)", true);
  if (!connection_) return;
  // Gloo has no average: sum, then divide in the buffer before the values are copied back.
  throughFlatBuffers(tensors, [&](const at::Tensor& buffer) {
    connection_->allReduce(buffer, c10d::ReduceOp::SUM, "all-reduce (mean)");
    buffer.div_(static_cast<double>(world_size_));
  });
}

void ProcessGroup::broadcast(const std::vector<at::Tensor>& tensors, int root) {
  checkTensors(tensors, "broadcast", false);
  require(root >= 0 && root < world_size_, "broadcast: root rank " + std::to_string(root) +
                                               " is not in [0, " + std::to_string(world_size_) +
                                               ")");
  if (!connection_) return;
  throughFlatBuffers(tensors, [&](const at::Tensor& buffer) {
    connection_->guarded("broadcast", [&] {
      std::vector<at::Tensor> one{buffer};
      c10d::BroadcastOptions from_root;
      from_root.rootRank = root;
      from_root.rootTensor = 0;
      waitFor(connection_->group->broadcast(one, from_root));
    });
  });
}

void ProcessGroup::barrier() {
  if (!connection_) return;
  connection_->guarded("barrier", [&] { waitFor(connection_->group->barrier()); });
}

double ProcessGroup::allReduceMax(double value) {
  if (!connection_) return value;
  const at::Tensor one = at::full({1}, value, at::kDouble);
  connection_->allReduce(one, c10d::ReduceOp::MAX, "all-reduce (max)");
  return one.item<double>();
}

std::vector<at::Tensor> ProcessGroup::allGather(const at::Tensor& values) {
  require(values.defined() && values.dim() == 1 && values.scalar_type() == at::kDouble,
          "all-gather: expects a 1-D double tensor");
  if (!connection_) return {values};
  // Gloo gathers equal lengths: every rank sends its length first and the longest sets the size.
  const at::Tensor lengths = at::zeros({world_size_}, at::kDouble);
  lengths[rank_] = static_cast<double>(values.numel());
  connection_->allReduce(lengths, c10d::ReduceOp::SUM, "all-gather (lengths)");
  const int64_t longest = static_cast<int64_t>(lengths.max().item<double>());
  if (longest == 0) return std::vector<at::Tensor>(world_size_, values);
  at::Tensor padded = at::zeros({longest}, at::kDouble);
  padded.narrow(0, 0, values.numel()).copy_(values);
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int r = 0; r < world_size_; ++r)
    gathered[0].push_back(at::empty({longest}, at::kDouble));
  connection_->guarded("all-gather", [&] {
    std::vector<at::Tensor> input{padded};
    waitFor(connection_->group->allgather(gathered, input));
  });
  std::vector<at::Tensor> result;
  for (int r = 0; r < world_size_; ++r)
    result.push_back(gathered[0][r].narrow(0, 0, static_cast<int64_t>(lengths[r].item<double>())));
  return result;
}

}  // namespace qforge::algos
