// Redis' stringmatchlen (util.c): glob matching for KEYS, SCAN MATCH and CONFIG GET.
#include <cctype>

#include "glob.h"

namespace conduit::kv {
namespace {

bool match_impl(const char* p, size_t plen, const char* s, size_t slen, bool nocase, bool* skip_longer, int depth) {
  // Bound the recursion on patterns like "*a*a*a*...": Redis limits nesting the same way.
  if (depth > 1000) return false;
  while (plen > 0 && slen > 0) {
    switch (p[0]) {
      case '*':
        while (plen > 1 && p[1] == '*') {
          ++p;
          --plen;
        }
        if (plen == 1) return true;
        while (slen > 0) {
          if (match_impl(p + 1, plen - 1, s, slen, nocase, skip_longer, depth + 1)) return true;
          if (*skip_longer) return false;
          ++s;
          --slen;
        }
        *skip_longer = true;
        return false;
      case '?':
        ++s;
        --slen;
        break;
      case '[': {
        ++p;
        --plen;
        const bool negate = plen > 0 && p[0] == '^';
        if (negate) {
          ++p;
          --plen;
        }
        bool match = false;
        for (;;) {
          if (plen == 0) {
            // Unterminated: treat as end of class (Redis steps back one char).
            break;
          }
          if (p[0] == '\\' && plen >= 2) {
            ++p;
            --plen;
            if (p[0] == s[0]) match = true;
          } else if (p[0] == ']') {
            break;
          } else if (plen >= 3 && p[1] == '-') {
            int start = static_cast<unsigned char>(p[0]);
            int end = static_cast<unsigned char>(p[2]);
            int c = static_cast<unsigned char>(s[0]);
            if (start > end) std::swap(start, end);
            if (nocase) {
              start = std::tolower(start);
              end = std::tolower(end);
              c = std::tolower(c);
            }
            p += 2;
            plen -= 2;
            if (c >= start && c <= end) match = true;
          } else {
            if (nocase ? std::tolower(static_cast<unsigned char>(p[0])) == std::tolower(static_cast<unsigned char>(s[0]))
                       : p[0] == s[0])
              match = true;
          }
          ++p;
          --plen;
        }
        if (plen == 0) {
          // Mirror Redis: the loop consumed the pattern; do not step past its end.
          if (negate) match = !match;
          if (!match) return false;
          ++s;
          --slen;
          return slen == 0;
        }
        if (negate) match = !match;
        if (!match) return false;
        ++s;
        --slen;
        break;
      }
      case '\\':
        if (plen >= 2) {
          ++p;
          --plen;
        }
        [[fallthrough]];
      default:
        if (nocase ? std::tolower(static_cast<unsigned char>(p[0])) != std::tolower(static_cast<unsigned char>(s[0]))
                   : p[0] != s[0])
          return false;
        ++s;
        --slen;
        break;
    }
    ++p;
    --plen;
    if (slen == 0) {
      while (plen > 0 && *p == '*') {
        ++p;
        --plen;
      }
      break;
    }
  }
  return plen == 0 && slen == 0;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view s, bool nocase) {
  bool skip_longer = false;
  return match_impl(pattern.data(), pattern.size(), s.data(), s.size(), nocase, &skip_longer, 0);
}

}  // namespace conduit::kv
