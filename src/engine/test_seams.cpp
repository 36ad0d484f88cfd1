#include "engine/test_seams.h"

namespace ordo {

TestSeams g_test_seams;

}  // namespace ordo
