// rpc::Attachment and allocate_attachment (include/conduit/rpc/attachment.h).
#include "conduit/rpc/attachment.h"

#include <algorithm>
#include <cstring>

#include "attachment_access.h"

namespace conduit::rpc {

namespace {
memory::Chain private_copy(const memory::Chain& c) {
  if (c.empty()) return {};
  memory::Slice s = memory::Slice::heap(c.size());
  c.copy_to(s.writable_data(), c.size());
  return memory::Chain(std::move(s));
}

memory::Chain share(const memory::Chain& c) {
  memory::Chain out;
  for (size_t i = 0; i < c.count(); ++i) out.append(c.slice(i));
  return out;
}
}  // namespace

Attachment::Attachment(const Attachment& o) : chain_(o.view_ ? private_copy(o.chain_) : share(o.chain_)) {}

Attachment& Attachment::operator=(const Attachment& o) {
  if (this != &o) {
    chain_ = o.view_ ? private_copy(o.chain_) : share(o.chain_);
    view_ = false;
  }
  return *this;
}

Attachment::Attachment(Attachment&& o) {
  if (o.view_) {
    chain_ = private_copy(o.chain_);
  } else {
    chain_ = std::move(o.chain_);
  }
  o.clear();
}

Attachment& Attachment::operator=(Attachment&& o) {
  if (this == &o) return *this;
  if (o.view_) {
    chain_ = private_copy(o.chain_);
  } else {
    chain_ = std::move(o.chain_);
  }
  view_ = false;
  o.clear();
  return *this;
}

void Attachment::append(std::string_view bytes) {
  if (bytes.empty()) return;
  chain_.append(memory::Slice::copy_of({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
}

void Attachment::append(const Attachment& other) {
  if (other.view_) {
    chain_.append(private_copy(other.chain_));
    return;
  }
  for (size_t i = 0; i < other.chain_.count(); ++i) chain_.append(other.chain_.slice(i));
}

void Attachment::clear() {
  chain_.clear();
  view_ = false;
}

memory::Chain Attachment::to_chain() const { return view_ ? private_copy(chain_) : share(chain_); }

memory::Chain Attachment::release() {
  memory::Chain out = view_ ? private_copy(chain_) : std::move(chain_);
  clear();
  return out;
}

size_t Attachment::copy_to(std::span<uint8_t> out, size_t from) const {
  if (from >= chain_.size()) return 0;
  return chain_.copy_to(out.data(), out.size(), from);
}

std::string Attachment::to_string() const { return chain_.to_string(); }

void Attachment::compact() {
  if (!view_ && chain_.count() == 1 && chain_.front().headroom() == 0 && chain_.front().tailroom() == 0 &&
      chain_.front().owner() == nullptr)
    return;  // already one private heap slice of exactly these bytes
  chain_ = private_copy(chain_);
  view_ = false;
}

bool operator==(const Attachment& a, const Attachment& b) {
  if (a.size() != b.size()) return false;
  // Walk both chains without materialising either.
  size_t ia = 0, ib = 0, oa = 0, ob = 0;
  while (ia < a.chain_.count() && ib < b.chain_.count()) {
    const memory::Slice& sa = a.chain_.slice(ia);
    const memory::Slice& sb = b.chain_.slice(ib);
    const size_t n = std::min(sa.size() - oa, sb.size() - ob);
    if (std::memcmp(sa.data() + oa, sb.data() + ob, n) != 0) return false;
    oa += n;
    ob += n;
    if (oa == sa.size()) ++ia, oa = 0;
    if (ob == sb.size()) ++ib, ob = 0;
  }
  return true;
}

// --- rpc-internal ------------------------------------------------------------------------

namespace detail {

void AttachmentAccess::set_view(Attachment& dst, memory::Chain&& c) {
  dst.chain_ = std::move(c);
  dst.view_ = !dst.chain_.empty();
}

void AttachmentAccess::set_private(Attachment& dst, memory::Chain&& c) {
  dst.chain_ = std::move(c);
  dst.view_ = false;
}

void AttachmentAccess::take(Attachment& dst, Attachment& src) {
  dst.chain_ = std::move(src.chain_);
  dst.view_ = src.view_;
  src.clear();
}

void AttachmentAccess::make_private(Attachment& a) {
  if (a.view_) a.compact();
}

}  // namespace detail

}  // namespace conduit::rpc
