// ToyNPU, a made-up chip added to qforge from outside the library through its extension points:
// its own observer and fake quantizer (registered by name, then named in toy_npu.json), its own
// placement (toy_npu.json's "placement") and its own deploy writer.
#pragma once

#include "deploy/writer_registry.h"
#include "quant/registry.h"

namespace toy_npu {

// Adds to registries that may already hold the built-ins:
//  observer "Toy3Sigma" {sigmas = 3}: range = mean +- sigmas * standard deviation (population,
//    over everything observed), intersected with the observed [min, max]. Per-tensor.
//  fake quantizer "ToyShift": the chip requantizes with bit shifts, so every scale is a power of
//    two, rounded up from the observer's (never clipping more than it asked); values round half
//    away from zero. Per-tensor or per-channel.
//  writer "toy_npu": `toy_npu.params`, one block per quantizer: a header line, its shifts and
//    zero points, and for weights their shape and integer levels.
void registerToyNpu(qforge::quant::ObserverRegistry& observers,
                    qforge::quant::FakeQuantizerRegistry& fake_quantizers,
                    qforge::deploy::WriterRegistry& writers);

}  // namespace toy_npu
