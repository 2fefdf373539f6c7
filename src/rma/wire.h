// Big-endian field access for rma's wire formats (descriptor, emulation frames): the
// project's one set (conduit/base/big_endian.h) under the names rma's code uses.
#pragma once

#include "conduit/base/big_endian.h"

namespace conduit::rma::wire {

using big_endian::get16;
using big_endian::get32;
using big_endian::get64;
using big_endian::put16;
using big_endian::put32;
using big_endian::put64;

}  // namespace conduit::rma::wire
