// The golden format's parser and its `=== check` matcher, which must be able to fail.
#include "tests/golden/golden_case.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ampc::golden {
namespace {

using ::testing::HasSubstr;

constexpr char kOutput[] =
    "g (float x) => (float y) {\n"
    "  a = Relu(x)\n"
    "  b = Relu(a)\n"
    "  y = Neg(b)\n"
    "}\n";

TEST(GoldenChecks, LinesInOrderPassAsSubstringsOfOutputLines) {
  EXPECT_EQ(MatchChecks("a = Relu(x)\n  b = Relu\n\ny = Neg(b)\n", 10, kOutput), "");
}

TEST(GoldenChecks, MissingLineNamesItsLineWhereTheSearchStartedAndTheOutput) {
  const std::string failure = MatchChecks("a = Relu(x)\nb = Relu(a)\ny = Abs(b)\n", 10, kOutput);
  EXPECT_THAT(failure, HasSubstr("check at line 12 not found: y = Abs(b)"));
  EXPECT_THAT(failure,
              HasSubstr("searched output lines 4-5, after output line 3 matched the check at "
                        "line 11"));
  EXPECT_THAT(failure, HasSubstr("output (5 lines):\n   1: g (float x) => (float y) {\n"));
  EXPECT_THAT(failure, HasSubstr("   4:   y = Neg(b)\n"));
}

TEST(GoldenChecks, FirstCheckSearchesFromTheStart) {
  EXPECT_THAT(MatchChecks("Softmax\n", 3, kOutput),
              HasSubstr("check at line 3 not found: Softmax\n  searched output lines 1-5, from "
                        "the start of the output"));
}

TEST(GoldenChecks, LineBeforeThePreviousMatchFails) {
  EXPECT_THAT(MatchChecks("b = Relu(a)\na = Relu(x)\n", 1, kOutput),
              HasSubstr("check at line 2 not found: a = Relu(x)"));
}

TEST(GoldenChecks, OneOutputLineMatchesOneCheck) {
  EXPECT_EQ(MatchChecks("= Relu(\n= Relu(\n", 1, kOutput), "");
  EXPECT_THAT(MatchChecks("= Relu(\n= Relu(\n= Relu(\n", 1, kOutput),
              HasSubstr("check at line 3 not found"));
}

TEST(GoldenChecks, CheckDoesNotSpanLines) {
  EXPECT_THAT(MatchChecks("Relu(x)\n  b\n", 1, "a = Relu(x)\n  b = Relu(a)\n"), "");
  EXPECT_THAT(MatchChecks("Relu(x)\n  b = Relu(x)\n", 1, "a = Relu(x)\n  b = Relu(a)\n"),
              HasSubstr("check at line 2 not found"));
}

TEST(GoldenChecks, NotFailsOnlyBetweenItsNeighbouringMatches) {
  EXPECT_THAT(MatchChecks("a = Relu(x)\nNOT: Relu\ny = Neg(b)\n", 20, kOutput),
              HasSubstr("NOT check at line 21 found at output line 3: Relu\n  it may not appear "
                        "in output lines 3-3, after output line 2 matched the check at line 20"));
  EXPECT_EQ(MatchChecks("a = Relu(x)\nNOT: Neg\nb = Relu(a)\n", 20, kOutput), "");
}

TEST(GoldenChecks, NotAtTheEndsCoversTheRestOfTheOutput) {
  EXPECT_THAT(MatchChecks("NOT: float\ny = Neg(b)\n", 1, kOutput),
              HasSubstr("NOT check at line 1 found at output line 1"));
  EXPECT_THAT(MatchChecks("a = Relu(x)\nNOT: }\n", 1, kOutput),
              HasSubstr("NOT check at line 2 found at output line 5"));
  EXPECT_EQ(MatchChecks("b = Relu(a)\nNOT: Relu\n", 1, kOutput), "");
}

TEST(GoldenChecks, NextMatchesOnlyTheLineRightAfter) {
  EXPECT_EQ(MatchChecks("a = Relu(x)\nNEXT: b = Relu(a)\nNEXT: y = Neg(b)\n", 1, kOutput), "");
  EXPECT_THAT(MatchChecks("a = Relu(x)\nNEXT: y = Neg(b)\n", 7, kOutput),
              HasSubstr("NEXT check at line 8 not found: y = Neg(b)\n  it must match output line "
                        "3, right after output line 2 matched the check at line 7"));
  EXPECT_THAT(MatchChecks("}\nNEXT: }\n", 1, kOutput), HasSubstr("NEXT check at line 2"));
}

TEST(GoldenChecks, CommentsAndBlankLinesAreSkipped) {
  EXPECT_EQ(MatchChecks("# why the next line matters\n\na = Relu(x)\n  # more\n", 1, kOutput), "");
}

TEST(GoldenChecks, FailingNotPrintsTheOutput) {
  EXPECT_THAT(MatchChecks("a = Relu(x)\nNOT: Neg\n", 1, kOutput), HasSubstr("output (5 lines):\n"));
}

constexpr char kCase[] =
    "# rule\n"         // 1
    "=== input\n"      // 2
    "<model>\n"        // 3
    "=== exit 0\n"     // 4
    "=== check\n"      // 5
    "  a = Relu(x)\n"  // 6
    "NOT: Abs\n";      // 7

TEST(GoldenCaseFormat, CheckSectionKnowsItsFirstLineAndSurvivesFormatting) {
  absl::StatusOr<GoldenCase> golden = ParseGoldenCase(kCase);
  ASSERT_TRUE(golden.ok()) << golden.status();
  EXPECT_EQ(golden->checks, "  a = Relu(x)\nNOT: Abs\n");
  EXPECT_EQ(golden->check_line, 6);
  EXPECT_TRUE(golden->output.empty());
  absl::StatusOr<GoldenCase> again = ParseGoldenCase(FormatGoldenCase(*golden));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->checks, golden->checks);
}

TEST(GoldenCaseFormat, OutputAndCheckTogetherAreRefused) {
  const std::string text = std::string(kCase) + "=== output\nx\n";
  EXPECT_THAT(std::string(ParseGoldenCase(text).status().message()),
              HasSubstr("'=== output' or '=== check', not both"));
}

TEST(GoldenCaseFormat, CheckWithoutALineThatMustAppearIsRefused) {
  EXPECT_FALSE(ParseGoldenCase("=== input\n<m>\n=== check\nNOT: Abs\n\n").ok());
  EXPECT_FALSE(ParseGoldenCase("=== input\n<m>\n=== check\n\n").ok());
}

TEST(GoldenCaseFormat, NextWithoutAMatchBeforeItIsRefused) {
  EXPECT_FALSE(ParseGoldenCase("=== input\n<m>\n=== check\nNEXT: a\n").ok());
  EXPECT_FALSE(ParseGoldenCase("=== input\n<m>\n=== check\na\nNOT: b\nNEXT: c\n").ok());
  EXPECT_TRUE(ParseGoldenCase("=== input\n<m>\n=== check\na\nNEXT: c\nNOT: b\n").ok());
}

TEST(GoldenCaseFormat, SectionTwiceIsRefused) {
  EXPECT_FALSE(ParseGoldenCase("=== input\n<m>\n=== stderr\na\n=== stderr\nb\n").ok());
}

}  // namespace
}  // namespace ampc::golden
