#include "graph/capture.h"

namespace ordo {

ORDO_HOT_TLS_SHARED Capture* t_capture = nullptr;

}  // namespace ordo
