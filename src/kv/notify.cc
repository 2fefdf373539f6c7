// Keyspace notifications (notify-keyspace-events), as Redis 7.0 publishes them: a command
// that changes a key calls CommandContext::notify with the event's class and name; when
// the class is on, the event goes out through pub/sub like a PUBLISH, on
// __keyspace@<db>__:<key> (message: the event) and/or __keyevent@<db>__:<event> (message:
// the key).  It runs under the server lock inside the command, so subscribers on any io
// thread get it (publish_message hands it to their worker) and, inside MULTI/EXEC, every
// queued command's events in order.  With notifications off the cost is one test of a
// word per event site (ServerImpl::notify is inline).
#include "server_impl.h"

namespace conduit::kv {

bool parse_keyspace_events(std::string_view text, uint32_t* flags) {
  uint32_t f = 0;
  for (char c : text) {
    switch (c) {
      case 'A': f |= kNotifyAll; break;
      case 'g': f |= kNotifyGeneric; break;
      case '$': f |= kNotifyString; break;
      case 'l': f |= kNotifyList; break;
      case 's': f |= kNotifySet; break;
      case 'h': f |= kNotifyHash; break;
      case 'z': f |= kNotifyZset; break;
      case 'x': f |= kNotifyExpired; break;
      case 'e': f |= kNotifyEvicted; break;
      case 'K': f |= kNotifyKeyspace; break;
      case 'E': f |= kNotifyKeyevent; break;
      case 't': f |= kNotifyStream; break;
      case 'm': f |= kNotifyKeyMiss; break;
      case 'd': f |= kNotifyModule; break;
      case 'n': f |= kNotifyNew; break;
      default: return false;
    }
  }
  *flags = f;
  return true;
}

std::string keyspace_events_text(uint32_t f) {
  std::string s;
  if ((f & kNotifyAll) == kNotifyAll) {
    s += 'A';
  } else {
    const std::pair<uint32_t, char> classes[] = {{kNotifyGeneric, 'g'}, {kNotifyString, '$'}, {kNotifyList, 'l'},
                                                 {kNotifySet, 's'},     {kNotifyHash, 'h'},   {kNotifyZset, 'z'},
                                                 {kNotifyExpired, 'x'}, {kNotifyEvicted, 'e'}, {kNotifyStream, 't'},
                                                 {kNotifyModule, 'd'},  {kNotifyNew, 'n'}};
    for (const auto& [bit, letter] : classes)
      if (f & bit) s += letter;
  }
  if (f & kNotifyKeyspace) s += 'K';
  if (f & kNotifyKeyevent) s += 'E';
  if (f & kNotifyKeyMiss) s += 'm';
  return s;
}

void ServerImpl::publish_keyspace_event(std::string_view event, std::string_view key, int db) {
  const uint32_t f = options_.notify_keyspace_events;
  char num[24];
  const std::string_view dbid(num, ll2string(num, db));
  std::string channel;
  if (f & kNotifyKeyspace) {
    channel.reserve(16 + dbid.size() + key.size());
    channel.append("__keyspace@").append(dbid).append("__:").append(key);
    publish_message(channel, event);
  }
  if (f & kNotifyKeyevent) {
    channel.clear();
    channel.append("__keyevent@").append(dbid).append("__:").append(event);
    publish_message(channel, key);
  }
}

}  // namespace conduit::kv
