// deny_io_uring COMMAND [ARGS...]: runs COMMAND with io_uring_setup(2)
// failing with EPERM, as under kernel.io_uring_disabled=2 or a container's
// seccomp profile, so a test can make the kernel really refuse a ring. A
// seccomp filter (no new privileges, so no root needed) is inherited across
// exec by the command and its children; every other system call is allowed.
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
constexpr unsigned k_arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr unsigned k_arch = AUDIT_ARCH_AARCH64;
#else
#error "deny_io_uring: add this architecture's AUDIT_ARCH_*"
#endif

#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425   // the same number on every architecture (include/uapi/asm-generic/unistd.h)
#endif

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
        return 2;
    }
    sock_filter filter[] = {
        // Another architecture's system call numbers mean other calls: refuse those outright.
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k_arch, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        std::fprintf(stderr, "deny_io_uring: PR_SET_NO_NEW_PRIVS: %s\n", std::strerror(errno));
        return 77;
    }
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        std::fprintf(stderr, "deny_io_uring: PR_SET_SECCOMP: %s\n", std::strerror(errno));
        return 77;
    }
    ::execvp(argv[1], argv + 1);
    std::fprintf(stderr, "deny_io_uring: %s: %s\n", argv[1], std::strerror(errno));
    return 127;
}
