#include "daemon/session/private_socket.hpp"

#include <sys/stat.h>

namespace nbdsched::daemon {

void bind_private(boost::asio::local::stream_protocol::acceptor& acceptor, const std::string& path,
                  boost::system::error_code& ec) {
    acceptor.open(boost::asio::local::stream_protocol(), ec);
    if (ec) return;
    // Linux's unix_bind() gives the new file the socket inode's mode.
    if (::fchmod(acceptor.native_handle(), 0600) != 0) {
        ec.assign(errno, boost::system::system_category());
        return;
    }
    acceptor.bind(boost::asio::local::stream_protocol::endpoint(path), ec);
    if (ec) return;
    // A kernel that ignored the socket's mode: at least close the window now.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) != 0 && ::chmod(path.c_str(), 0600) != 0)
        ec.assign(errno, boost::system::system_category());
}

}   // namespace nbdsched::daemon
