// epoll for fds of ours.  A socket whose readiness the preload computes (fast, negotiating,
// forked) is never registered in the program's kernel epoll instance -- the kernel socket
// behind it says nothing useful -- but kept as a Membership and answered from its readiness;
// plain fds, listeners and nested instances stay in the kernel.  An instance with such
// members gets the engine's backend fd (the "marker") registered in it, so a kernel wait on
// it also wakes for the fast channels.  See README.md, "epoll".
//
// Level-triggered members are reported while their condition holds.  EPOLLET: reported when
// the socket becomes readable (writable) anew -- after a read that came up short or empty,
// once the channel has data again -- and on EPOLL_CTL_ADD/MOD.  EPOLLONESHOT: disabled after
// one report until EPOLL_CTL_MOD.  EPOLLRDHUP reads ahead to tell an end of stream from data.
// An instance inside another: its members of ours make it readable to the outer one.
#pragma once

#include <signal.h>
#include <sys/epoll.h>

#include "process.h"

namespace conduit::preload {

// s changed phase (from `old`): re-tags its fds and moves its registrations between the kernel
// instance and the preload.  Under the lock.
void phase_changed(Socket& s, Phase old);
// The program closed fd (one name of s): its memberships go.  Under the lock.
void drop_memberships_of_fd(Socket& s, int fd);
// The program closed an epoll instance.  Under the lock.
void close_epoll(Epoll& e);

// The interposers' bodies (they take the lock).
int preload_epoll_ctl(int epfd, int op, int fd, epoll_event* ev);
int preload_epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask);
// True if an fd of ours is an epoll instance with members of ours ready (poll() on it).
bool epoll_user_ready(Epoll& e);

}  // namespace conduit::preload
