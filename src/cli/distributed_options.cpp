// The data-parallel flags shared by `qat` and `quantize` (algos/distributed.h checks the values).
#include "cli/commands.h"

namespace qforge::cli {

void addDistributedOptions(CLI::App* command, algos::DistributedOptions& options,
                           const std::string& together) {
  command->add_option("--world-size", options.world_size, "Processes " + together + " together")
      ->capture_default_str();
  command->add_option("--rank", options.rank, "This process's rank (0 .. world size - 1)")
      ->capture_default_str();
  command->add_option("--master", options.master, "ADDR:PORT where rank 0 listens")
      ->capture_default_str();
  command->add_option("--timeout", options.timeout_seconds, "Seconds to wait for the other ranks")
      ->capture_default_str();
}

}  // namespace qforge::cli
