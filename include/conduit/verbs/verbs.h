// Umbrella header for the verbs layer.
#pragma once

#include "conduit/verbs/bootstrap.h"
#include "conduit/verbs/cm.h"
#include "conduit/verbs/cq.h"
#include "conduit/verbs/device.h"
#include "conduit/verbs/memory.h"
#include "conduit/verbs/qp.h"
#include "conduit/verbs/wr.h"
