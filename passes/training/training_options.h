// What `--train` asks of the training-step pass (docs/training.md, docs/training-design.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ampc {

struct TrainingOptions {
  enum class Optimizer { kSgd, kMomentum, kAdam, kAdamW };
  enum class LossScale { kDefault, kDynamic, kStatic, kNone };  // kDefault: dynamic for FP16

  // The optimizer of a parameter group of --train-config (docs/training.md): every field is
  // resolved (what the file leaves out comes from the command line), but weight_decay < 0, which
  // is the group optimizer's default (passes/training/param_groups.h).
  struct Group {
    std::string params;  // RE2, full match on the parameter's name
    std::string where;   // for messages: "FILE: groups[i]"
    Optimizer optimizer = Optimizer::kAdamW;
    float lr_scale = 1.0f;  // the group's learning rate is ampc.lr * lr_scale
    float weight_decay = -1.0f;
    float momentum = 0.9f;
    float dampening = 0.0f;
    bool nesterov = false;
    float beta1 = 0.9f;
    float beta2 = 0.999f;
    float epsilon = 1e-8f;
  };

  bool enabled = false;
  std::string loss;    // the scalar loss value of the forward graph
  std::string freeze;  // RE2; initializers whose names fully match are not trained
  // --loss-op KIND:VALUE: the loss-op pass adds that loss and sets `loss` to its name.
  std::string loss_op;
  // --untie: the untie pass gives each parameter the exporter merged its own initializer.
  bool untie = false;
  // --dropout (passes/training/dropout_mode.h): kOff, every Dropout is the identity in the step
  // (and in the graph); kGraph, every Dropout the model has drops in the step at its own ratio;
  // kRatio, at `dropout_ratio`. The graph (inference) keeps Dropout off in every mode.
  enum class Dropout { kOff, kGraph, kRatio };
  Dropout dropout = Dropout::kOff;
  float dropout_ratio = 0.0f;  // kRatio: in (0, 1)

  Optimizer optimizer = Optimizer::kAdamW;
  float lr = 1e-3f;  // recorded for the trainer (metadata ampc.lr); the step takes ampc.lr
  float weight_decay = -1.0f;  // < 0: the optimizer's default (AdamW 0.01, others 0)
  float momentum = 0.9f;       // kMomentum
  float dampening = 0.0f;
  bool nesterov = false;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float clip_grad_norm = 0.0f;  // 0: no clipping
  int64_t accumulate = 1;       // micro-batches per optimizer step

  LossScale loss_scale = LossScale::kDefault;
  float init_scale = 65536.0f;  // the static scale with kStatic
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  int64_t hysteresis = 1;
  float min_scale = 0.0f;  // 0: none
  float max_scale = 0.0f;  // 0: none

  // --train-config: parameter groups (the first whose regex matches a parameter takes it; the
  // fields above are the default group), the LR schedule as the canonical JSON recorded in the
  // metadata ampc.lr_schedule (empty: none recorded, constant), and ampc train's limit of
  // consecutive skipped steps recorded as metadata ampc.max_consecutive_skips (0: none recorded).
  std::vector<Group> groups;
  std::string lr_schedule;
  int64_t max_consecutive_skips = 0;
};

}  // namespace ampc
