// lookup_reader: answers LookupMsg and BatchedP2PLookupMsg on the caller's own
// thread (the ROUTER socket's or an HTTP worker's), with no actor hop.
//
// A lookup only reads: it hashes the prompt's tokens into chunk keys, reads
// each key's holders from the index under that key's slot lock
// (kv_index::lookup: never behind a sub-batch, only behind an op in the same
// slot) and merges them with the latest directory_view. Each actor hop on the
// way costs two thread wake-ups, 50-100 us on a paravirtualised VM -- the whole
// budget of a P2P lookup -- so the node answers reads where they arrive. The
// directory publishes a fresh immutable view after every registry change,
// before it answers the request that caused it.
//
//   lookup_reader reader{index, hashing};
//   reader.publish(view);                 // directory
//   msg::Msg answer = reader.answer(m);   // any thread
//
// Thread-safety: thread-safe; answer() never blocks on anything but the
// slot locks of the keys it reads. CAF-free.
#pragma once

#include "index/kv_index.hpp"
#include "messages/chunk_hash.hpp"
#include "messages/lmcache_msgs.hpp"
#include "registry/published.hpp"
#include "registry/registry.hpp"

#include <functional>
#include <memory>
#include <vector>

namespace lmcc::actors {

/// What a lookup read: one holder list per key, in order, and the first key
/// whose list may be short (read only from uncertain copies, or from no
/// owner); lists.size() when none.
struct holder_reads {
  std::vector<holder_list> lists;
  size_t first_unsure = 0;
};

/// Where a lookup reads each key's holders: the node's own index, or (in a
/// cluster) that for the slots this node holds and the other owners for the
/// rest.
using holder_source = std::function<holder_reads(const std::vector<uint64_t>& keys)>;

/// The holders of each key from `index`, read under one shared lock.
holder_reads local_holders(const kv_index& index, const std::vector<uint64_t>& keys);

/// The answer to a LookupMsg or BatchedP2PLookupMsg from `view` and the
/// holders `source` gives (an ErrorMsg for any other message).
msg::Msg answer_lookup(const directory_view& view, const holder_source& source,
                       const msg::chunk_hasher& hasher, const msg::Msg& m);

class lookup_reader {
public:
  /// Reads `index` only (a single node), or `source` when it is given.
  lookup_reader(std::shared_ptr<const kv_index> index, msg::chunk_hash_options hashing,
                holder_source source = {})
    : index_(std::move(index)), hasher_(hashing), source_(std::move(source)) {
    if (!source_)
      source_ = [index = index_](const std::vector<uint64_t>& keys) {
        return local_holders(*index, keys);
      };
  }

  /// Replaces the view lookups resolve holders with.
  void publish(std::shared_ptr<const directory_view> view) { view_.publish(std::move(view)); }

  msg::Msg answer(const msg::Msg& m) const {
    return answer_lookup(*view_.current(), source_, hasher_, m);
  }

  /// The uid of the worker whose location `holder` is, in the current view;
  /// 0 when no registered worker has it.
  uint64_t worker_of(holder_id holder) const {
    const auto view = view_.current();
    const auto it = view->holders.find(holder);
    return it == view->holders.end() ? 0 : view->workers.at(it->second.worker).uid;
  }

private:
  std::shared_ptr<const kv_index> index_;
  msg::chunk_hasher hasher_;
  holder_source source_;
  published<directory_view> view_;
};

} // namespace lmcc::actors
