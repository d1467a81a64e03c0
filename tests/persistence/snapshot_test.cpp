#include "persistence/store.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace lmcc::persistence;
using namespace lmcc::persistence::test;
using lmcc::msg::wire_int;

namespace {

std::string snapshot_record_at(uint64_t position) {
  log_record r;
  r.holder = position % 7;
  r.ops = {{position, true}, {position * 3, false}};
  std::string out;
  encode_log_record(r, out);
  return out;
}

std::string slot_value(uint32_t slot, uint64_t position) {
  slot_snapshot_writer w{slot, position};
  for (uint64_t k = 0; k < 10; ++k)
    w.add(slot * 1000 + k, std::vector<uint64_t>{1 + k % 2});
  std::string out;
  w.finish(out);
  return out;
}

/// Two workers, three holder states, 300 slot snapshots, 2000 log records
/// above a floor of 1001; returns what it wrote.
contents populate(store& s) {
  contents c;
  c.workers = {sample_worker(1, "inst-a", 0), sample_worker(2, "inst-a", wire_int{-3})};
  c.holders = {sample_holder(1, 1, {seq_state::tracking, 40}), sample_holder(2, 1),
               sample_holder(3, 2, {seq_state::resynced, 0})};
  auto b = s.new_batch();
  for (const auto& w : c.workers)
    b.put_worker(w);
  for (const auto& h : c.holders)
    b.put_holder(h);
  for (uint32_t slot = 0; slot < 300; ++slot) {
    c.slots[slot] = slot_value(slot, 1000);
    b.put_slot(slot, c.slots[slot]);
  }
  for (uint64_t p = 1; p <= 3000; ++p)
    b.append_log(p, snapshot_record_at(p));
  EXPECT_TRUE(s.commit(b));
  auto t = s.new_batch();
  t.truncate_log(1001);
  EXPECT_TRUE(s.commit(t));
  c.log_floor = 1001;
  for (uint64_t p = 1001; p <= 3000; ++p)
    c.log[p] = snapshot_record_at(p);
  return c;
}

void copy_tree(const std::string& from, const std::string& to) {
  // A real copy (not hard links): corrupting it must not touch the source DB.
  fs::copy(from, to, fs::copy_options::recursive);
}

std::string first_sst(const std::string& dir) {
  for (const auto& name : list_names(dir))
    if (name.ends_with(".sst"))
      return name;
  ADD_FAILURE() << "no SST in " << dir;
  return {};
}

std::string read_text(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out << text;
}

} // namespace

TEST(persistence_snapshot, checkpoint_verify_and_restore_give_the_same_contents) {
  temp_dir tmp;
  contents written;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    written = populate(*s);
    auto info = s->checkpoint(tmp.sub("snap"));
    ASSERT_TRUE(info) << info.error().message;
    EXPECT_EQ(info->node_id, "n1");
    EXPECT_EQ(info->format_version, 3u);
    EXPECT_EQ(info->workers, 2u);
    EXPECT_EQ(info->holders, 3u);
    EXPECT_EQ(info->slots, 300u);
    EXPECT_EQ(info->log_records, 2000u); // the truncated ones are not counted
    // The manifest lists every file of the checkpoint, and nothing else.
    std::vector<std::string> listed;
    for (const auto& f : info->files)
      listed.push_back(f.name);
    listed.push_back(snapshot_manifest_name);
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, list_names(tmp.sub("snap")));
    // No partial directory is left behind.
    EXPECT_EQ(list_names(tmp.path()), (std::vector<std::string>{"db", "snap"}));

    // Later writes are not in the snapshot.
    auto more = s->new_batch();
    more.append_log(3001, snapshot_record_at(3001));
    more.delete_slot(0);
    ASSERT_TRUE(s->commit(more));
    // A checkpoint never overwrites.
    auto again = s->checkpoint(tmp.sub("snap"));
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("already exists"), std::string::npos);
  }
  auto verified = store::verify_snapshot(tmp.sub("snap"));
  ASSERT_TRUE(verified) << verified.error().message;
  EXPECT_EQ(verified->workers, 2u);
  EXPECT_EQ(verified->holders, 3u);
  EXPECT_EQ(verified->slots, 300u);
  EXPECT_EQ(verified->log_records, 2000u);

  auto restored = store::restore(tmp.sub("snap"), options_at(tmp.sub("fresh/db")), "n1");
  ASSERT_TRUE(restored) << restored.error().message;
  EXPECT_EQ(read_all(**restored), written);
  restored->reset();
  // No temp dirs beside the target.
  EXPECT_EQ(list_names(tmp.sub("fresh")), (std::vector<std::string>{"db"}));
  // The snapshot is still valid after being restored from.
  EXPECT_TRUE(store::verify_snapshot(tmp.sub("snap")));
}

TEST(persistence_snapshot, restore_replaces_an_existing_store) {
  temp_dir tmp;
  contents written;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    written = populate(*s);
    ASSERT_TRUE(s->checkpoint(tmp.sub("snap")));
    // Diverge after the snapshot: the restore must bring back the snapshot's state.
    auto b = s->new_batch();
    b.delete_holder(1);
    b.delete_worker(1);
    b.put_slot(9, slot_value(9, 5000));
    b.truncate_log(2500);
    ASSERT_TRUE(s->commit(b));
  }
  auto restored = store::restore(tmp.sub("snap"), options_at(tmp.sub("db")), "n1");
  ASSERT_TRUE(restored) << restored.error().message;
  EXPECT_EQ(read_all(**restored), written);
  restored->reset();
  EXPECT_EQ(list_names(tmp.path()), (std::vector<std::string>{"db", "snap"}));
}

TEST(persistence_snapshot, extra_files_are_verified_and_restored_with_the_store) {
  temp_dir tmp;
  const std::string record = R"({"epoch": 3})";
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    populate(*s);
    EXPECT_FALSE(s->checkpoint(tmp.sub("bad1"), {{"a/b", "x"}}));
    EXPECT_FALSE(s->checkpoint(tmp.sub("bad2"), {{"MANIFEST.lmcc.json", "x"}}));
    auto info = s->checkpoint(tmp.sub("snap"), {{"lmcc-membership.json", record}});
    ASSERT_TRUE(info) << info.error().message;
  }
  auto verified = store::verify_snapshot(tmp.sub("snap"));
  ASSERT_TRUE(verified) << verified.error().message;
  EXPECT_TRUE(std::any_of(verified->files.begin(), verified->files.end(),
                          [](const auto& f) { return f.name == "lmcc-membership.json"; }));
  // A changed byte is caught like any other file's.
  {
    std::ofstream f(tmp.sub("snap") + "/lmcc-membership.json", std::ios::trunc);
    f << R"({"epoch": 4})";
  }
  EXPECT_FALSE(store::verify_snapshot(tmp.sub("snap")));
  {
    std::ofstream f(tmp.sub("snap") + "/lmcc-membership.json", std::ios::trunc);
    f << record;
  }
  auto restored = store::restore(tmp.sub("snap"), options_at(tmp.sub("fresh/db")), "n1");
  ASSERT_TRUE(restored) << restored.error().message;
  std::ifstream in(tmp.sub("fresh/db") + "/lmcc-membership.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), record);
}

TEST(persistence_snapshot, restore_refuses_another_nodes_snapshot_and_a_target_in_use) {
  temp_dir tmp;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    populate(*s);
    ASSERT_TRUE(s->checkpoint(tmp.sub("snap")));
  }
  auto r = store::restore(tmp.sub("snap"), options_at(tmp.sub("other")), "n2");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("taken by node 'n1', not 'n2'"), std::string::npos)
      << r.error().message;
  EXPECT_FALSE(fs::exists(tmp.sub("other")));

  // Another process holds the target's LOCK the way RocksDB does (fcntl).
  ASSERT_TRUE(must_open(tmp.sub("target")));
  int ready[2];
  int release[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(release), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    ::close(release[1]); // else the read below never sees EOF
    int fd = ::open((tmp.sub("target") + "/LOCK").c_str(), O_RDWR);
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    char ok = (fd >= 0 && ::fcntl(fd, F_SETLK, &fl) == 0) ? '1' : '0';
    (void)!::write(ready[1], &ok, 1);
    char buf;
    (void)!::read(release[0], &buf, 1); // until the parent closes its end
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  char ok = 0;
  ASSERT_EQ(::read(ready[0], &ok, 1), 1);
  ASSERT_EQ(ok, '1');
  const auto before = fingerprint(tmp.sub("target"));
  auto busy = store::restore(tmp.sub("snap"), options_at(tmp.sub("target")), "n1");
  ::close(release[1]);
  ::close(ready[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().message.find("in use by process " + std::to_string(child)),
            std::string::npos)
      << busy.error().message;
  EXPECT_EQ(fingerprint(tmp.sub("target")), before);
  // Once released, the same restore goes through.
  EXPECT_TRUE(store::restore(tmp.sub("snap"), options_at(tmp.sub("target")), "n1"));
}

struct corruption {
  const char* name;
  std::function<void(const std::string& snap)> apply;
  /// A piece of the expected message (the file it names).
  std::function<std::string(const std::string& snap)> expect;
};

TEST(persistence_snapshot, corrupted_snapshots_are_refused_and_the_target_is_untouched) {
  temp_dir tmp;
  contents target_contents;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    populate(*s);
    ASSERT_TRUE(s->checkpoint(tmp.sub("snap")));
  }
  {
    // The target: a live store with different contents.
    auto t = must_open(tmp.sub("target/db"));
    ASSERT_TRUE(t);
    auto b = t->new_batch();
    b.put_worker(sample_worker(7, "inst-z", 1));
    b.put_slot(3, slot_value(3, 7));
    ASSERT_TRUE(t->commit(b));
    target_contents = read_all(*t);
  }
  const auto target_print = fingerprint(tmp.sub("target"));

  std::vector<corruption> cases = {
      {"truncated SST",
       [](const std::string& snap) {
         auto sst = (fs::path{snap} / first_sst(snap)).string();
         fs::resize_file(sst, fs::file_size(sst) / 2);
       },
       [](const std::string& snap) { return "file " + first_sst(snap) + " has "; }},
      {"flipped byte in an SST",
       [](const std::string& snap) {
         auto sst = (fs::path{snap} / first_sst(snap)).string();
         auto text = read_text(sst);
         text[text.size() / 3] = static_cast<char>(text[text.size() / 3] ^ 0x01);
         write_text(sst, text);
       },
       [](const std::string& snap) { return "file " + first_sst(snap) + " is corrupted"; }},
      {"deleted file", [](const std::string& snap) { fs::remove(fs::path{snap} / "CURRENT"); },
       [](const std::string&) {
         return std::string{"file CURRENT listed in the manifest is missing"};
       }},
      {"missing manifest",
       [](const std::string& snap) { fs::remove(fs::path{snap} / snapshot_manifest_name); },
       [](const std::string&) { return std::string{"MANIFEST.lmcc.json is missing"}; }},
      {"garbage manifest",
       [](const std::string& snap) {
         write_text((fs::path{snap} / snapshot_manifest_name).string(), "{\"format\": \"lmcc-sn");
       },
       [](const std::string&) { return std::string{"MANIFEST.lmcc.json is not a JSON object"}; }},
      {"wrong version in the manifest",
       [](const std::string& snap) {
         auto path = (fs::path{snap} / snapshot_manifest_name).string();
         auto j = nlohmann::json::parse(read_text(path));
         j["format_version"] = 4;
         write_text(path, j.dump());
       },
       [](const std::string&) {
         return std::string{"MANIFEST.lmcc.json has format_version 4, this build reads 3"};
       }},
      {"manifest escaping the directory",
       [](const std::string& snap) {
         auto path = (fs::path{snap} / snapshot_manifest_name).string();
         auto j = nlohmann::json::parse(read_text(path));
         j["files"][0]["name"] = "../db/CURRENT";
         write_text(path, j.dump());
       },
       [](const std::string&) { return std::string{"invalid file name \"../db/CURRENT\""}; }},
  };

  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string bad = tmp.sub("bad" + std::to_string(n++));
    copy_tree(tmp.sub("snap"), bad);
    c.apply(bad);
    std::string expected_piece = c.expect(bad);

    auto v = store::verify_snapshot(bad);
    ASSERT_FALSE(v);
    EXPECT_NE(v.error().message.find(expected_piece), std::string::npos) << v.error().message;
    EXPECT_EQ(v.error().message.rfind("snapshot " + bad + ": ", 0), 0u) << v.error().message;

    auto r = store::restore(bad, options_at(tmp.sub("target/db")), "n1");
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find(expected_piece), std::string::npos) << r.error().message;
    EXPECT_EQ(fingerprint(tmp.sub("target")), target_print);
    EXPECT_EQ(list_names(tmp.sub("target")), (std::vector<std::string>{"db"}));
  }
  // The original snapshot was never touched by corrupting the copies.
  EXPECT_TRUE(store::verify_snapshot(tmp.sub("snap")));
  auto t = must_open(tmp.sub("target/db"));
  ASSERT_TRUE(t);
  EXPECT_EQ(read_all(*t), target_contents);
}

TEST(persistence_snapshot, a_consistent_manifest_over_a_broken_db_never_replaces_the_target) {
  // Checksums match but RocksDB cannot open the copy: the failure comes after
  // the copy, and must still leave the target as it was and no temp dir behind.
  temp_dir tmp;
  {
    auto s = must_open(tmp.sub("db"));
    ASSERT_TRUE(s);
    populate(*s);
    ASSERT_TRUE(s->checkpoint(tmp.sub("snap")));
  }
  {
    auto t = must_open(tmp.sub("target/db"));
    ASSERT_TRUE(t);
  }
  const auto target_print = fingerprint(tmp.sub("target"));
  std::string bad = tmp.sub("bad");
  copy_tree(tmp.sub("snap"), bad);
  write_text((fs::path{bad} / "CURRENT").string(), "MANIFEST-999999\n");
  auto manifest_path = (fs::path{bad} / snapshot_manifest_name).string();
  auto j = nlohmann::json::parse(read_text(manifest_path));
  for (auto& f : j["files"])
    if (f["name"] == "CURRENT") {
      f["size"] = fs::file_size(fs::path{bad} / "CURRENT");
      f["crc32c"] = *files::file_crc32c((fs::path{bad} / "CURRENT").string());
    }
  write_text(manifest_path, j.dump());
  ASSERT_TRUE(store::verify_snapshot(bad));

  auto r = store::restore(bad, options_at(tmp.sub("target/db")), "n1");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("MANIFEST-999999"), std::string::npos) << r.error().message;
  EXPECT_EQ(fingerprint(tmp.sub("target")), target_print);
  EXPECT_EQ(list_names(tmp.sub("target")), (std::vector<std::string>{"db"}));
}
