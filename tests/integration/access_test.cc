// The access policy against the real hurrayd, with clients of two (and three) unprivileged
// uids: the test runs as root, starts the daemon (sockets 0666 in a 0755 directory, so that
// every uid is admitted), then forks children that drop to uid 1001, 1002 or 1003
// (setgroups, setgid, setuid) and exec hurray_access_agent, which prints how each
// operation ended. Both channels are covered: the agent's publish and acquire go over the
// session socket or over gRPC; delete, describe and list are gRPC.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "testing/daemon_expectations.h"
#include "testing/daemon_process.h"
#include "testing/status_matchers.h"

namespace hurray::integration {
namespace {

using ::hurray::testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr uid_t kOwner = 1001;
constexpr uid_t kOther = 1002;
constexpr uid_t kStranger = 1003;

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root, to run clients as other uids";
  }
  void TearDown() override {
    if (daemon_ != nullptr) ::hurray::testing::ExpectStopsCleanly(*daemon_);
  }

  // Starts hurrayd with `settings` after the socket modes (a [[namespace]] table may
  // follow them), and `pool_settings` in [cpu_pool].
  void StartDaemon(std::vector<std::string> settings, std::vector<std::string> pool_settings = {}) {
    settings.insert(settings.begin(), {"socket_mode = \"0666\"", "session_socket_mode = \"0666\""});
    ASSERT_OK_AND_ASSIGN(daemon_,
                         DaemonProcess::Start({.binary = HURRAYD_PATH,
                                               .name = "hurray-access",
                                               .settings = std::move(settings),
                                               .cpu_pool_settings = std::move(pool_settings)}));
    ASSERT_EQ(::chmod(daemon_->directory().c_str(), 0755), 0);
  }

  // Runs the agent as `uid` (group `uid` too) over `channel`; returns its lines, one per op.
  std::vector<std::string> RunAs(uid_t uid, const std::vector<std::string>& ops,
                                 const std::string& channel = "session") {
    std::vector<std::string> args = {HURRAY_ACCESS_AGENT_PATH, daemon_->socket_path(), channel};
    args.insert(args.end(), ops.begin(), ops.end());
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    const pid_t pid = ::fork();
    if (pid == 0) {  // Only async-signal-safe calls until exec: the parent has threads.
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      if (::setgroups(0, nullptr) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(126);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    std::string text;
    char buffer[4096];
    for (ssize_t got; (got = ::read(out[0], buffer, sizeof buffer)) > 0;) {
      text.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(out[0]);
    int status = 0;
    EXPECT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "agent as uid " << uid << " ended with status " << status << "; log:\n"
        << daemon_->Log(4000);
    std::vector<std::string> lines;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) lines.push_back(line);
    EXPECT_EQ(lines.size(), ops.size()) << text;
    lines.resize(ops.size());
    return lines;
  }

  // The one line of one operation as `uid`.
  std::string One(uid_t uid, const std::string& op, const std::string& channel = "session") {
    return RunAs(uid, {op}, channel).front();
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(AccessTest, DefaultPolicyLetsOtherUidReadButNotPublishSupersedeOrDelete) {
  StartDaemon({});
  EXPECT_EQ(One(kOwner, "publish:team/w"), "publish team/w OK");

  EXPECT_EQ(One(kOther, "acquire:team/w"), "acquire team/w OK");
  EXPECT_EQ(One(kOther, "describe:team/w"), "describe team/w OK owner 1001");
  EXPECT_EQ(One(kOther, "list:team/"), "list team/ OK team/w");
  const std::string denied =
      "PERMISSION_DENIED namespace \"team\": {} denied to uid 1002 by the default policy (owned "
      "by uid 1001)";
  for (const std::string channel : {"session", "grpc"}) {
    SCOPED_TRACE(channel);
    EXPECT_EQ(One(kOther, "publish:team/w", channel),  // Supersede.
              "publish team/w " + fmt::format(fmt::runtime(denied), "publish"));
    EXPECT_EQ(One(kOther, "publish:team/new", channel),
              "publish team/new " + fmt::format(fmt::runtime(denied), "publish"));
  }
  EXPECT_EQ(One(kOther, "delete:team/w"),
            "delete team/w " + fmt::format(fmt::runtime(denied), "delete"));
  // The refused calls changed nothing; the owner may still supersede and delete.
  EXPECT_EQ(One(kOther, "describe:team/w"), "describe team/w OK owner 1001");
  EXPECT_EQ(RunAs(kOwner, {"publish:team/w", "delete:team/w"}),
            (std::vector<std::string>{"publish team/w OK", "delete team/w OK"}));
  // Other namespaces are the other uid's to claim; an emptied one is free again.
  EXPECT_EQ(One(kOther, "publish:mine/x"), "publish mine/x OK");
  EXPECT_EQ(One(kOther, "publish:team/again"), "publish team/again OK");
  EXPECT_EQ(One(kOwner, "delete:mine/x"),
            "delete mine/x PERMISSION_DENIED namespace \"mine\": delete denied to uid 1001 by the "
            "default policy (owned by uid 1002)");
}

TEST_F(AccessTest, ConfiguredRulesDecideRuleByRuleAndDenyWhatNoRuleMatches) {
  StartDaemon({"[[namespace]]", R"(pattern = "team-a/**")", R"(publish = ["uid:1001"])",
               R"(read = ["uid:1001", "gid:1002"])", R"(delete = ["uid:1001"])", "[[namespace]]",
               R"(pattern = "shared/*")", R"(publish = ["uid:1001", "uid:1002"])",
               R"(read = ["any"])", "delete = []"});
  // Rule 1: publish and delete for uid 1001 only; read for uid 1001 and group 1002.
  EXPECT_EQ(One(kOwner, "publish:team-a/deep/w"), "publish team-a/deep/w OK");
  EXPECT_EQ(One(kOther, "publish:team-a/deep/w", "grpc"),
            "publish team-a/deep/w PERMISSION_DENIED namespace \"team-a\": publish denied to uid "
            "1002 by rule 1 (pattern \"team-a/**\")");
  EXPECT_EQ(One(kOther, "acquire:team-a/deep/w"), "acquire team-a/deep/w OK");  // By its gid.
  EXPECT_EQ(One(kStranger, "acquire:team-a/deep/w"),
            "acquire team-a/deep/w PERMISSION_DENIED namespace \"team-a\": read denied to uid "
            "1003 by rule 1 (pattern \"team-a/**\")");
  EXPECT_THAT(One(kStranger, "describe:team-a/deep/w"), HasSubstr("read denied to uid 1003"));
  EXPECT_THAT(One(kOther, "delete:team-a/deep/w"),
              HasSubstr("delete denied to uid 1002 by rule 1"));

  // Rule 2: both may publish one level under shared/, anyone may read, nobody may delete.
  EXPECT_EQ(One(kOther, "publish:shared/x"), "publish shared/x OK");
  EXPECT_EQ(One(kOwner, "publish:shared/x"), "publish shared/x OK");  // No owner here.
  EXPECT_EQ(One(kStranger, "acquire:shared/x"), "acquire shared/x OK");
  EXPECT_THAT(One(kOwner, "delete:shared/x"),
              HasSubstr("delete denied to uid 1001 by rule 2 (pattern \"shared/*\")"));
  // "*" stays within a component; a name no rule matches is denied.
  EXPECT_THAT(One(kOther, "publish:shared/x/y"), HasSubstr("no [[namespace]] rule's pattern"));
  EXPECT_THAT(One(kOwner, "publish:else/x"),
              HasSubstr("namespace \"else\": publish denied to uid 1001 by default"));
  // Listing shows each uid only what it may read.
  EXPECT_EQ(One(kStranger, "list:"), "list  OK shared/x");
  EXPECT_EQ(One(kOther, "list:"), "list  OK shared/x,team-a/deep/w");
  EXPECT_EQ(One(kOwner, "delete:team-a/deep/w"), "delete team-a/deep/w OK");
}

TEST_F(AccessTest, PoolLimitedToNamespacesRefusesOtherNames) {
  StartDaemon({}, {"namespaces = [\"ok/**\"]"});
  EXPECT_EQ(One(kOwner, "publish:ok/w"), "publish ok/w OK");
  EXPECT_EQ(One(kOwner, "publish:other/w"),
            "publish other/w PERMISSION_DENIED pool cpu holds only namespaces [ok/**]: other/w "
            "matches none of them");
}

}  // namespace
}  // namespace hurray::integration
