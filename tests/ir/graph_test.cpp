#include "ir/graph.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace qforge {
namespace {

TEST(GraphTest, AddNodeRecordsProducerAndUses) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* relu = g.addNode("Relu", {x}, {"y"}, "relu");
  g.addOutput(relu->output(0));
  EXPECT_EQ(relu->output(0)->producer(), relu);
  ASSERT_EQ(x->uses().size(), 1u);
  EXPECT_EQ(x->uses()[0].node, relu);
}

}  // namespace
}  // namespace qforge
