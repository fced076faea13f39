// What `ampc train` shows while it trains (runtime/trainer.h): a progress bar redrawn on a
// terminal, plain lines on stderr otherwise, and the metrics CSV (step,loss,scale,grad_norm,
// skipped,lr per logged step; the loss is the mean over the logged window).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "runtime/training_session.h"

namespace ampc {

class TrainingProgress {
 public:
  // `per_epoch` batches an epoch; a line and a CSV row every `log_every` batches.
  TrainingProgress(int64_t per_epoch, int64_t log_every);

  // Opens the metrics CSV at `path` (none when empty), appended to with `append` (resuming) and
  // given its header when it is new.
  absl::Status OpenMetrics(const std::string& path, bool append);

  // Whether every metrics row so far reached the file (a full disk is an error, not a gap).
  absl::Status MetricsWritten();

  // Called after every step queued: on a terminal the bar shows the count, with the numbers
  // of the last read.
  void Queued(int64_t batches_run, int64_t epoch);

  // Whether a line is due after `queued` more steps.
  bool LogDue(int64_t queued) const { return window_ + queued >= log_every_; }

  // Called after each read of the steps queued since the previous one: lines and CSV rows every
  // log_every steps and at the end of an epoch.
  void Taken(int64_t batches_run, int64_t epoch, int64_t batch_size, const TakenSteps& taken);

 private:
  // The window's mean finite loss (NaN when it has none).
  double Loss() const { return losses_ > 0 ? loss_sum_ / static_cast<double>(losses_) : NAN; }
  void Draw(int64_t batches_run, int64_t epoch) const;

  int64_t per_epoch_, log_every_;
  bool tty_;
  std::string metrics_path_;
  std::ofstream metrics_;
  int64_t window_ = 0, losses_ = 0;
  double loss_sum_ = 0, rate_ = 0;
  double shown_loss_ = NAN;  // the bar's: the window's mean at the last read
  bool read_ = false;        // whether any step has been read back
  StepResult last_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace ampc
