// Data-parallel communication for training (QAT): every rank runs the same loop on its own shard of
// the data and the ranks average their gradients after each backward pass. Built on libtorch's
// c10d (a TCPStore on rank 0 for rendezvous, ProcessGroupGloo for the collectives, over TCP); the
// c10d and gloo headers stay in distributed.cpp so the rest of qforge does not compile them.
//
// With world_size 1 nothing is opened (no store, no sockets) and every call is a no-op, so the
// training loop calls the same functions whether it runs alone or not.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace qforge::algos {

struct DistributedOptions {
  int world_size = 1;
  int rank = 0;
  std::string master = "127.0.0.1:29500";  // ADDR:PORT; rank 0 hosts the TCPStore
  double timeout_seconds = 300;            // connecting, and each collective
};

struct MasterAddress {
  std::string host;  // without the brackets of "[::1]:29500"
  int port = 0;
};

// Parses "ADDR:PORT" ("127.0.0.1:29500", "node0:29500", "[::1]:29500"); throws qforge::Error with
// one line naming --master otherwise.
MasterAddress parseMasterAddress(const std::string& master);

// Throws qforge::Error naming the flag (--world-size, --rank, --master) when an option is out of
// range.
void validateDistributedOptions(const DistributedOptions& options);

class ProcessGroup {
 public:
  // Connects all ranks; blocks until every one has joined or the timeout has passed (then throws
  // qforge::Error saying which rank could not reach which master).
  explicit ProcessGroup(const DistributedOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int worldSize() const { return world_size_; }

  // In place: each tensor becomes the mean / sum of its values across ranks. The tensors travel
  // in one flattened buffer per dtype (one collective for the usual all-float32 gradient list).
  // Tensors must be defined, dense and on the CPU; they may be non-contiguous or require grad.
  // allReduceMean needs floating-point tensors.
  void allReduceMean(const std::vector<at::Tensor>& tensors);
  void allReduceSum(const std::vector<at::Tensor>& tensors);
  // Copies root's values into every rank's tensors, in place (e.g. the initial weights).
  void broadcast(const std::vector<at::Tensor>& tensors, int root = 0);
  void barrier();
  // The maximum over ranks of a scalar (e.g. to agree on "stop now" after a signal on one rank).
  double allReduceMax(double value);
  // Every rank's 1-D double tensor (each may have its own length), in rank order. Alone: {values}.
  std::vector<at::Tensor> allGather(const at::Tensor& values);

 private:
  struct Connection;  // the store and the gloo group; absent when world_size is 1
  int rank_;
  int world_size_;
  std::unique_ptr<Connection> connection_;
};

}  // namespace qforge::algos
