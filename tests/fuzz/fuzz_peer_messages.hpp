// The fuzz body of lmcc-fuzz-peer-messages: what a node decodes from another
// node, shared by the libFuzzer target (fuzz_peer_messages_main.cpp, clang only)
// and its g++ smoke test.
//
// Nodes talk through CAF's middleman: every value of a message is read by
// caf::binary_deserializer into the type the message names, and lmcc's own
// `inspect` overloads (actors/inspect.hpp) decode what they carry (a
// sub-batch's op-log record, a message's msgpack). The middleman reads a
// payload before any actor sees it, so these decoders face whatever reaches
// the node's cluster port. An input is a selector byte and the bytes; the
// selector picks (modulo the number of cases), first the fixed cases, then
// each type of lmcc's CAF type-id block (actors/type_ids.hpp, taken from the
// block itself, so that a type added there is fuzzed without an edit here;
// the types after it move to other selectors):
//   - a value of one of the block's types, read alone with no actor system;
//   - a whole caf::message, read through an actor system with lmcc's types
//     registered, as the middleman reads one (its type names, then each
//     value), when every type it names is one lmcc's actors exchange. CAF's
//     other built-in types are CAF's own code and some of it trusts the bytes
//     (a @charbuf allocates the up to 4 GiB its length header claims before
//     reading it; a double written back never returns if it is infinite): the
//     middleman reads those too, from any connection to the cluster port,
//     which is why that port belongs on a private network (docs/cluster.md,
//     "Trust");
//   - an op-log record (persistence/records.hpp) as given, and again with its
//     checksum made right, so that mutations reach the fields behind it; the
//     same for a slot snapshot (a header and a body, each sealed) and a
//     holder state;
//   - a membership record (cluster/membership_record.hpp: what a peer sends
//     with members_atom);
//   - the handshake's MAC over ids and nonces a peer chooses (cluster/handshake.hpp).
// check_peer_message(input) holds: nothing crashes or allocates more than the
// input can justify (libFuzzer's -malloc_limit_mb); a refusal says why; and
// what is accepted survives its own encoder: written back and read again it
// is the same value, and writing it again gives the same bytes. A slot
// snapshot's walk also matches its counts, and names only holders of its
// dictionary; the MAC is 64 hex digits and mac_equal agrees with ==.
//
//   std::string why = lmcc::fuzz::check_peer_message(input);   // "" when all hold
//
// Thread-safety: reentrant; the actor system for whole messages is made once.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lmcc::fuzz {

/// Runs the whole body on one input: "" when every invariant holds, else the first broken.
std::string check_peer_message(std::string_view input);

/// Real encodings of every case, each behind its selector byte: values of the
/// block's types as CAF writes them, messages as the middleman writes them,
/// records, snapshots, holder states and membership records as lmcc writes them.
std::vector<std::string> peer_message_seeds();

} // namespace lmcc::fuzz
