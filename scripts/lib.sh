# Helpers shared by the throwaway test servers' scripts (postgres.sh, redis.sh, zookeeper.sh),
# which source this file. Each message names the script that sourced it.

# apt_install WHAT [APT-GET INSTALL ARGS...]: installs packages with apt-get (through sudo
# unless root), waiting up to 10 min for another apt run's lock, quietly; WHAT is for the message.
apt_install() {
  local what=$1 sudo=""
  shift
  [ "$(id -u)" = 0 ] || sudo=sudo
  echo "$(basename "$0"): installing $what" >&2
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

# A TCP port free on 127.0.0.1 right now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# The servers of redis.sh and zookeeper.sh: plain processes whose pid is in $DIR/pid.

# Alive, not a zombie: a killed daemon's parent here may be slow to reap it.
alive() {
  [ -r "/proc/$1/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$1/stat" 2>/dev/null
}

pid_running() {
  [ -f "$DIR/pid" ] && alive "$(cat "$DIR/pid")"
}

# kill_pid_file FILE: kills the process whose pid FILE holds at once (SIGKILL, also when
# frozen), waits until it is gone, and removes FILE.
kill_pid_file() {
  local file=$1 pid
  if [ -f "$file" ]; then
    pid=$(cat "$file")
    if alive "$pid"; then
      kill -CONT "$pid" 2>/dev/null || true
      kill -9 "$pid" 2>/dev/null || true
      while alive "$pid"; do sleep 0.02; done
    fi
  fi
  rm -f "$file"
}

# Kills the server at once (SIGKILL, also when frozen) and waits until it is gone.
server_kill() {
  kill_pid_file "$DIR/pid"
}

# The commands redis.sh and zookeeper.sh share (see their headers): halt, freeze, thaw, stop.
server_command() {
  case $1 in
    halt) server_kill ;;
    freeze) kill -STOP "$(cat "$DIR/pid")" ;;
    thaw) kill -CONT "$(cat "$DIR/pid")" ;;
    stop)
      server_kill
      rm -rf "$DIR"
      ;;
  esac
}
