// Chrome trace JSON ("Trace Event Format"), which Perfetto and chrome://tracing open: one
// process, one thread row per worker (plus one for callers), one complete ("X") event per op.
// Timestamps are microseconds with nanosecond decimals.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_set>

#include "base/utf8.h"
#include "trace/trace_file.h"
#include "trace/tracer.h"

namespace ordo {

namespace {

// JSON text must be UTF-8, and op names are whatever bytes the caller gave: each byte that does
// not start a well-formed sequence is written as U+FFFD, so that the file always parses.
void put_json_string(std::FILE* f, const char* str) {
  const auto* s = reinterpret_cast<const unsigned char*>(str);
  std::fputc('"', f);
  while (*s) {
    const unsigned char c = *s;
    const size_t n = utf8_sequence_length(s);
    if (c == '"' || c == '\\') {
      std::fputc('\\', f);
      std::fputc(c, f);
    } else if (c < 0x20) {
      std::fprintf(f, "\\u%04x", c);
    } else if (n == 0) {
      std::fputs("\\ufffd", f);
    } else {
      std::fwrite(s, 1, n, f);
    }
    s += n ? n : 1;
  }
  std::fputc('"', f);
}

const char* outcome_name(TraceOutcome o) {
  switch (o) {
    case TraceOutcome::kOk:
      return "ok";
    case TraceOutcome::kFailed:
      return "failed";
    case TraceOutcome::kSkipped:
      return "skipped (an input var carried an error)";
    case TraceOutcome::kDeferred:
      return "deferred (completes later via ordo_complete)";
  }
  return "?";
}

void put_us(std::FILE* f, uint64_t ns) {
  std::fprintf(f, "%" PRIu64 ".%03u", ns / 1000, static_cast<unsigned>(ns % 1000));
}

void put_row_name(std::FILE* f, uint64_t tid, const std::string& label) {
  std::fprintf(f,
               ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%" PRIu64
               ",\"name\":\"thread_name\",\"args\":{\"name\":",
               tid);
  put_json_string(f, label.c_str());
  std::fprintf(f, "}}");
  std::fprintf(f,
               ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%" PRIu64
               ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%" PRIu64 "}}",
               tid, tid);
}

void put_event(std::FILE* f, uint64_t tid, const TraceRecord& r) {
  std::fprintf(f, ",\n{\"ph\":\"X\",\"pid\":1,\"tid\":%" PRIu64 ",\"cat\":\"op\",\"name\":", tid);
  put_json_string(f, r.name[0] ? r.name : "op");
  std::fprintf(f, ",\"ts\":");
  put_us(f, r.start_ns);
  std::fprintf(f, ",\"dur\":");
  put_us(f, r.end_ns - r.start_ns);
  std::fprintf(f, ",\"args\":{\"device\":\"%s:%u\",\"stream\":-1,\"outcome\":",
               r.device_type == ORDO_DEVICE_GPU ? "gpu" : "cpu",
               static_cast<unsigned>(r.device_id));
  put_json_string(f, outcome_name(r.outcome));
  std::fprintf(f, "}}");
}

}  // namespace

ordo_status write_chrome_trace(const std::vector<Tracer::RowView>& rows, const char* path) {
  TraceFile file;
  if (ordo_status st = file.open(path)) return st;
  std::FILE* f = file.stream();
  std::fprintf(f,
               "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"ordo %s\"},"
               "\"traceEvents\":[",
               ordo_version_string());
  std::fprintf(f,
               "\n{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"ordo\"}}");
  // Worker rows get tids 1..n; threads that are not workers get a base past them (1000 unless
  // there are more workers) plus their own number, each a row of its own, so that no two
  // overlapping ops share a row.
  for (size_t i = 1; i < rows.size(); ++i) {
    put_row_name(f, i, rows[i].label);
    const TraceBuffer& b = *rows[i].buffer;
    for (uint64_t k = 0, n = b.size(); k < n; ++k) put_event(f, i, b.at(k));
  }
  const uint64_t caller_base = std::max<uint64_t>(1000, rows.size());
  const TraceBuffer& ext = *rows[0].buffer;
  std::unordered_set<uint32_t> named;  // caller threads whose row has its name already
  for (uint64_t k = 0, n = ext.size(); k < n; ++k) {
    const TraceRecord& r = ext.at(k);
    if (named.insert(r.thread).second) {
      put_row_name(f, caller_base + r.thread, "caller thread " + std::to_string(r.thread));
    }
    put_event(f, caller_base + r.thread, r);
  }
  std::fprintf(f, "\n]}\n");
  return file.commit();
}

}  // namespace ordo
