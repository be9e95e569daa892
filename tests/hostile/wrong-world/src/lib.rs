//! Hostile fixture: a valid component for the wrong world.

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({ world: "greeter", path: "wit" });

    struct Greeter;
    export!(Greeter);

    impl Guest for Greeter {
        fn greet(name: String) -> String {
            format!("hello {name}")
        }
    }
}
