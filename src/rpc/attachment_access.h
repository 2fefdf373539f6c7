// What rpc itself may do to an Attachment that applications may not: build a view of a
// connection's receive memory, hand it between rpc's own objects without the copy that a
// public move makes, and turn it into private memory before the view's scope ends.
#pragma once

#include "conduit/rpc/attachment.h"

namespace conduit::rpc::detail {

struct AttachmentAccess {
  // dst = the bytes of `c`, slices of a connection's receive memory (see FrameReader).
  static void set_view(Attachment& dst, memory::Chain&& c);
  // dst = the bytes of `c`, the application's to keep.
  static void set_private(Attachment& dst, memory::Chain&& c);
  // dst = src (views stay views; src is left empty).
  static void take(Attachment& dst, Attachment& src);
  // A view becomes one private heap slice (one copy); other attachments are left alone.
  static void make_private(Attachment& a);
};

}  // namespace conduit::rpc::detail
