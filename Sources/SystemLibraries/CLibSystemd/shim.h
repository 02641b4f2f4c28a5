/* libsystemd (sd-bus), for CBus. */
#include <systemd/sd-bus.h>
