// The engine of SageAttention's recipes (KernelEngine::sage, kernel_recipe.hpp): INT8 Q and K with per-block,
// per-warp or per-thread scales (smooth K first), their exact integer product dequantised into the exponent,
// the online softmax with the max kept in scaled units, P cast to fp16 or FP8 and P·V on the tensor core
// (fp16 or fp32 accumulation, per block or running), V's per-channel scale applied after the normalisation.
// Each step follows thu-ml/SageAttention d1a57a5 (docs/kernel-sources.md §5), cited beside it.
#pragma once

#include <string>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/inputs/attention_inputs.hpp"

namespace pasa::detail {

// InputError (prefixed by `where`) for a schedule the sage engine cannot run: qk_quant missing, not an integer
// scheme, or grouping a row of D across scales; v_quant not one scale per channel; unknown v_format,
// p_format or pv_acc; and, for another engine, any of these fields set.
void check_sage_schedule(const KernelRecipe& k, const std::string& where);
AttentionOutput sage_attention(const AttentionInputs& in, const KernelRecipe& k, int threads);

}  // namespace pasa::detail
