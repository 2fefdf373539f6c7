// Big-endian field access for rma's wire formats (descriptor, emulation frames): the
// project's one set (conduit/base/big_endian.h) under the names rma's code uses.
#pragma once

#include "conduit/base/big_endian.h"

namespace conduit::rma::wire {

using namespace big_endian;  // put16/32/64, get16/32/64

}  // namespace conduit::rma::wire
