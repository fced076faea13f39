#include "runtime/trainer_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/core/input_file.h"

namespace ampc {

TrainingProgress::TrainingProgress(int64_t per_epoch, int64_t log_every)
    : per_epoch_(per_epoch), log_every_(std::max<int64_t>(log_every, 1)), tty_(isatty(2)) {}

absl::Status TrainingProgress::OpenMetrics(const std::string& path, bool append) {
  if (path.empty()) return absl::OkStatus();
  const bool header = !append || !Exists(path);
  metrics_path_ = path;
  metrics_.open(path, append ? std::ios::app : std::ios::trunc);
  if (header) metrics_ << "step,loss,scale,grad_norm,skipped,lr\n";
  return MetricsWritten();
}

absl::Status TrainingProgress::MetricsWritten() {
  if (metrics_path_.empty() || metrics_.flush()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(metrics_path_, ": cannot write the metrics"));
}

void TrainingProgress::Queued(int64_t batches_run, int64_t epoch) {
  if (tty_) Draw(batches_run, epoch);
}

void TrainingProgress::Taken(int64_t batches_run, int64_t epoch, int64_t batch_size,
                             const TakenSteps& taken) {
  for (float loss : taken.losses) {
    if (!std::isfinite(loss)) continue;
    loss_sum_ += loss;
    ++losses_;
  }
  window_ += static_cast<int64_t>(taken.losses.size());
  last_ = taken.last;
  const int64_t done = (batches_run - 1) % per_epoch_ + 1;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - start_).count();
  rate_ = seconds > 0 ? static_cast<double>(window_ * batch_size) / seconds : 0;
  shown_loss_ = Loss();
  read_ = true;
  if (tty_) Draw(batches_run, epoch);
  if (window_ < log_every_ && done != per_epoch_) return;
  const StepResult& r = taken.last;
  if (metrics_.is_open()) {
    metrics_ << absl::StrFormat("%d,%.6g,%.6g,%.6g,%d,%.9g\n", batches_run, Loss(), r.scale,
                                r.grad_norm, r.skipped_steps, r.lr)
             << std::flush;
  }
  if (!tty_) {
    std::fprintf(stderr, "epoch %lld step %lld loss %.4f scale %g skipped %lld samples/s %.0f\n",
                 static_cast<long long>(epoch + 1), static_cast<long long>(batches_run), Loss(),
                 r.scale, static_cast<long long>(r.skipped_steps), rate_);
  }
  window_ = losses_ = 0;
  loss_sum_ = 0;
  start_ = now;
}

void TrainingProgress::Draw(int64_t batches_run, int64_t epoch) const {
  const int64_t done = (batches_run - 1) % per_epoch_ + 1;
  const int filled = static_cast<int>(30 * done / per_epoch_);
  std::fprintf(stderr, "\repoch %lld [%s%s] %lld/%lld", static_cast<long long>(epoch + 1),
               std::string(filled, '=').c_str(), std::string(30 - filled, ' ').c_str(),
               static_cast<long long>(done), static_cast<long long>(per_epoch_));
  if (read_) {  // before the first read there are no numbers yet
    std::fprintf(stderr, " loss %.4f scale %g skipped %lld %.0f samples/s", shown_loss_,
                 last_.scale, static_cast<long long>(last_.skipped_steps), rate_);
  }
  std::fprintf(stderr, "\033[K");
  if (done == per_epoch_) std::fprintf(stderr, "\n");
}

}  // namespace ampc
