// A rewrite of a training step's graph for the runtime: the ai.ampc optimizer nodes that share
// their scalar inputs and attributes (every parameter of a group, one node each) become one
// MultiAdam or MultiSGD node of the runtime domain, so a device updates them all in one
// multi-tensor launch instead of one launch per parameter. Never changes the model a
// TrainingSession saves.
#pragma once

#include <onnx/onnx_pb.h>

namespace ampc {

// Rewrites each group of ai.ampc Adam (or SGD) nodes with the same three scalar inputs (skip,
// lr, step or first), the same attributes and the same arity (two or more nodes) into one
// MultiAdam (MultiSGD) node of kRuntimeDomain (conv_fusion.h): inputs the three scalars, then
// each member's other inputs in order; outputs each member's outputs in order. It takes the place
// of the group's last member, so only where no node between the first and the last member reads
// a member's output. Returns the number of nodes removed.
int FuseOptimizers(onnx::GraphProto& graph);

}  // namespace ampc
