// Rewrites of a training step's graph for the runtime: the ai.ampc optimizer nodes that share
// their scalar inputs and attributes (every parameter of a group, one node each) become one
// MultiAdam or MultiSGD node of the runtime domain, so a device updates them all in one
// multi-tensor launch instead of one launch per parameter; and the loss-scaling check and
// unscale become one pass over the gradients. Never changes the model a TrainingSession saves.
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

// Rewrites the step's ai.ampc CheckFinite and UnscaleClip nodes, when there is one of each and
// they read the same gradients in the same order, into one CheckUnscaleClip node of
// kRuntimeDomain in CheckFinite's place: inputs UnscaleClip's (scale, g_1..g_n), outputs
// (found, u_1..u_n, norm), UnscaleClip's attributes. A device then reads the gradients once, not
// twice. Only where UnscaleClip's scale is defined before CheckFinite. Returns the nodes removed
// (0 or 1).
int FuseCheckUnscaleClip(onnx::GraphProto& graph);

}  // namespace ampc
