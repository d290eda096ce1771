// Data-parallel calibration: ranks observe their own batches, then exchange what each observer
// saw (its batch summaries, quant/observer.h) and fold every rank's into every observer in global
// batch order. So N ranks end with the observers one process would have after all the batches:
// the same running ranges, EMA ranges, histograms (bin for bin) and moments.
#pragma once

#include <vector>

#include "quant/observer.h"

namespace qforge::algos {

class ProcessGroup;

// Turns holding on or off for every observer (Observer::holdObservations).
void holdObservations(const std::vector<quant::Observer*>& observers, bool hold);

// Gathers what each observer held on every rank and folds it in, rank 0's first. Every rank must
// call this with the same observers in the same order. Alone (null group or a world of one) the
// observer folds its own.
void foldObservationsOfAllRanks(ProcessGroup* group,
                                const std::vector<quant::Observer*>& observers);

// The observers' held observations as one double vector, and back (what travels between ranks).
at::Tensor packObservations(const std::vector<quant::HeldObservations>& held);
std::vector<quant::HeldObservations> unpackObservations(const at::Tensor& packed, size_t observers);

}  // namespace qforge::algos
