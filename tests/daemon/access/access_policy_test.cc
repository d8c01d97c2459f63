#include "access/access_policy.h"

#include <gtest/gtest.h>

#include <optional>

#include "testing/status_matchers.h"

namespace hurray::daemon {
namespace {

constexpr uid_t kDaemonUid = 999;
const PeerCredentials kAlice{.pid = 10, .uid = 1001, .gid = 1001};
const PeerCredentials kBob{.pid = 11, .uid = 1002, .gid = 1002};
const PeerCredentials kRootPeer{.pid = 12, .uid = 0, .gid = 0};
const PeerCredentials kDaemonPeer{.pid = 13, .uid = kDaemonUid, .gid = kDaemonUid};

TEST(NamespacePatternTest, SingleStarStaysWithinAComponentDoubleStarCrossesThem) {
  ASSERT_OK_AND_ASSIGN(const NamespacePattern one, NamespacePattern::Parse("shared/*", "p"));
  EXPECT_TRUE(one.Matches("shared/x"));
  EXPECT_FALSE(one.Matches("shared/x/y"));
  EXPECT_FALSE(one.Matches("sharedx/y"));
  ASSERT_OK_AND_ASSIGN(const NamespacePattern any, NamespacePattern::Parse("team-a/**", "p"));
  EXPECT_TRUE(any.Matches("team-a/x/y/z"));
  EXPECT_FALSE(any.Matches("team-b/x"));
  ASSERT_OK_AND_ASSIGN(const NamespacePattern mid, NamespacePattern::Parse("*/w-*.bin", "p"));
  EXPECT_TRUE(mid.Matches("m/w-1.bin"));
  EXPECT_FALSE(mid.Matches("m/x/w-1.bin"));
  EXPECT_ERROR(NamespacePattern::Parse("", "namespace[0].pattern"), StatusCode::kInvalidArgument,
               {"namespace[0].pattern is empty"});
  EXPECT_ERROR(NamespacePattern::Parse("a/***", "p"), StatusCode::kInvalidArgument, {"***"});
}

TEST(PrincipalTest, ParsesEveryFormAndResolvesNamesNow) {
  ASSERT_OK_AND_ASSIGN(const Principal uid, Principal::Parse("uid:1001", "f"));
  EXPECT_TRUE(uid.Matches(kAlice));
  EXPECT_FALSE(uid.Matches(kBob));
  ASSERT_OK_AND_ASSIGN(const Principal gid, Principal::Parse("gid:1002", "f"));
  EXPECT_TRUE(gid.Matches(kBob));
  ASSERT_OK_AND_ASSIGN(const Principal root, Principal::Parse("user:root", "f"));
  EXPECT_TRUE(root.Matches(kRootPeer));
  EXPECT_EQ(root.Explain(), "user:root (uid 0)");
  ASSERT_OK_AND_ASSIGN(const Principal group, Principal::Parse("group:root", "f"));
  EXPECT_TRUE(group.Matches(kRootPeer));
  EXPECT_FALSE(group.Matches(kAlice));
  ASSERT_OK_AND_ASSIGN(const Principal any, Principal::Parse("any", "f"));
  EXPECT_TRUE(any.is_any());
  EXPECT_ERROR(Principal::Parse("user:no-such-user-here", "namespace[0].read[1]"),
               StatusCode::kInvalidArgument,
               {"namespace[0].read[1]", "user \"no-such-user-here\" does not exist"});
  EXPECT_ERROR(Principal::Parse("group:no-such-group-here", "f"), StatusCode::kInvalidArgument,
               {"group \"no-such-group-here\" does not exist"});
  EXPECT_ERROR(Principal::Parse("uid:x1", "f"), StatusCode::kInvalidArgument, {"not a number"});
  EXPECT_ERROR(Principal::Parse("alice", "f"), StatusCode::kInvalidArgument,
               {"\"alice\" is not uid:N, user:NAME, gid:N, group:NAME or any"});
}

TEST(AccessPolicyTest, DefaultPolicyLetsOnlyTheOwnerWriteAndEveryoneRead) {
  const AccessPolicy policy(kDaemonUid);
  EXPECT_OK(policy.Check(AccessVerb::kPublish, "team/w", &kBob, std::nullopt));  // Unowned.
  EXPECT_OK(policy.Check(AccessVerb::kPublish, "team/w", &kAlice, 1001));
  EXPECT_ERROR(policy.Check(AccessVerb::kPublish, "team/w", &kBob, 1001),
               StatusCode::kPermissionDenied,
               {"namespace \"team\": publish denied to uid 1002 by the default policy (owned by "
                "uid 1001)"});
  EXPECT_ERROR(policy.Check(AccessVerb::kDelete, "team/w", &kBob, 1001),
               StatusCode::kPermissionDenied, {"delete denied to uid 1002"});
  EXPECT_OK(policy.Check(AccessVerb::kRead, "team/w", &kBob, 1001));
  EXPECT_TRUE(policy.MayRead("team/w", nullptr));  // Anonymous inspection sees everything.
  EXPECT_OK(policy.Check(AccessVerb::kDelete, "team/w", &kRootPeer, 1001));
  EXPECT_OK(policy.Check(AccessVerb::kDelete, "team/w", &kDaemonPeer, 1001));
  EXPECT_FALSE(policy.configured());
}

TEST(AccessPolicyTest, FirstMatchingRuleDecidesAndNoMatchIsDenied) {
  ASSERT_OK_AND_ASSIGN(
      const AccessPolicy policy,
      AccessPolicy::Make({{.pattern = "team-a/secret/**", .publish = {}, .read = {}, .remove = {}},
                          {.pattern = "team-a/**",
                           .publish = {"uid:1001"},
                           .read = {"any"},
                           .remove = {"gid:1001"}}},
                         {}, kDaemonUid));
  EXPECT_ERROR(policy.Check(AccessVerb::kRead, "team-a/secret/k", &kAlice, std::nullopt),
               StatusCode::kPermissionDenied,
               {"read denied to uid 1001 by rule 1 (pattern \"team-a/secret/**\")"});
  EXPECT_OK(policy.Check(AccessVerb::kPublish, "team-a/w", &kAlice, std::nullopt));
  EXPECT_ERROR(policy.Check(AccessVerb::kPublish, "team-a/w", &kBob, std::nullopt),
               StatusCode::kPermissionDenied, {"by rule 2 (pattern \"team-a/**\")"});
  EXPECT_OK(policy.Check(AccessVerb::kDelete, "team-a/w", &kAlice, std::nullopt));
  // Ownership plays no part once rules exist: bob is refused by the rule, not by an owner.
  EXPECT_ERROR(policy.Check(AccessVerb::kDelete, "team-a/w", &kBob, 1002),
               StatusCode::kPermissionDenied, {"by rule 2"});
  EXPECT_TRUE(policy.MayRead("team-a/w", nullptr));
  EXPECT_FALSE(policy.MayRead("team-a/secret/k", nullptr));
  EXPECT_ERROR(policy.Check(AccessVerb::kRead, "other/w", &kAlice, std::nullopt),
               StatusCode::kPermissionDenied, {"no [[namespace]] rule's pattern matches"});
  EXPECT_ERROR(policy.Check(AccessVerb::kRead, "other/w", nullptr, std::nullopt),
               StatusCode::kPermissionDenied, {"read denied to anonymous callers"});
  EXPECT_OK(policy.Check(AccessVerb::kRead, "other/w", &kDaemonPeer, std::nullopt));
  EXPECT_TRUE(policy.configured());
}

TEST(AccessPolicyTest, RuleMistakesNameTheirKey) {
  EXPECT_ERROR(AccessPolicy::Make(
                   {{.pattern = "a/**", .publish = {}, .read = {"uid:1", "who"}, .remove = {}}}, {},
                   kDaemonUid),
               StatusCode::kInvalidArgument, {"namespace[0].read[1]"});
  EXPECT_ERROR(AccessPolicy::Make({}, {{.pool = "cpu", .patterns = {""}}}, kDaemonUid),
               StatusCode::kInvalidArgument, {"cpu_pool.namespaces[0] is empty"});
}

TEST(AccessPolicyTest, PoolLimitsApplyToThePoolAndItsFamily) {
  ASSERT_OK_AND_ASSIGN(
      const AccessPolicy policy,
      AccessPolicy::Make({}, {{.pool = "cuda", .patterns = {"gpu/**"}}}, kDaemonUid));
  EXPECT_OK(policy.CheckPool("cuda:1", "gpu/w"));
  EXPECT_ERROR(policy.CheckPool("cuda:0", "cpu/w"), StatusCode::kPermissionDenied,
               {"pool cuda:0 holds only namespaces [gpu/**]: cpu/w matches none of them"});
  EXPECT_OK(policy.CheckPool("cpu", "cpu/w"));
  EXPECT_EQ(policy.PoolNamespaces("cuda:0"), std::vector<std::string>{"gpu/**"});
  EXPECT_TRUE(policy.PoolNamespaces("cpu").empty());
}

TEST(AccessPolicyTest, ExplainSaysEachRuleInWords) {
  ASSERT_OK_AND_ASSIGN(
      const AccessPolicy policy,
      AccessPolicy::Make(
          {{.pattern = "team-a/**", .publish = {"user:root"}, .read = {"any"}, .remove = {}}},
          {{.pool = "cpu", .patterns = {"team-a/**"}}}, kDaemonUid));
  const std::string text = policy.Explain();
  EXPECT_NE(
      text.find("rule 1: names matching \"team-a/**\"\n  publish: user:root (uid 0)\n"
                "  read:    any uid (and, to read, anonymous gRPC callers)\n  delete:  nobody\n"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find("pool cpu holds only names matching [team-a/**]"), std::string::npos) << text;
  EXPECT_NE(AccessPolicy(kDaemonUid).Explain().find("the default policy"), std::string::npos);
}

}  // namespace
}  // namespace hurray::daemon
