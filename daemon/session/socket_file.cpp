#include "daemon/session/socket_file.hpp"

#include <sys/stat.h>

namespace nbdsched::daemon {

std::string not_a_socket(const std::string& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || S_ISSOCK(st.st_mode)) return "";
    const char* what = S_ISREG(st.st_mode)   ? "a regular file"
                       : S_ISDIR(st.st_mode) ? "a directory"
                       : S_ISLNK(st.st_mode) ? "a symbolic link"
                                             : "a special file";
    return std::string("exists and is not a socket (") + what + ")";
}

}   // namespace nbdsched::daemon
