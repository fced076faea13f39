// A rewrite of a training step's graph for the runtime: the ai.ampc Adam nodes that share their
// scalar inputs and attributes (every parameter of a group, one node each) become one
// MultiAdam node of the runtime domain, so a device updates them all in one multi-tensor launch
// instead of one launch per parameter. Never changes the model a TrainingSession saves.
#pragma once

#include <onnx/onnx_pb.h>

namespace ampc {

// Rewrites each group of ai.ampc Adam nodes with the same skip, lr and step inputs and the same
// attributes (two or more) into one MultiAdam node of kRuntimeDomain (conv_fusion.h): inputs
// skip, lr, step, then param, grad, m, v of each member in order; outputs param, m, v of each.
// It takes the place of the group's last member, so only where no node between the first and
// the last member reads a member's output. Returns the number of nodes removed.
int FuseAdams(onnx::GraphProto& graph);

}  // namespace ampc
