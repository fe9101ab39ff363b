//! Placeholder while the libraries the CLI drives are landing; the real
//! command dispatcher replaces this in the integration commit.
fn main() {
    eprintln!("sprig: not assembled yet");
    std::process::exit(1);
}
