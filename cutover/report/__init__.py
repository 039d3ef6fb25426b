"""The HTML reports people read (drill, verify): one page style, headline numbers, tables, and charts
drawn with matplotlib as inline SVG. Each report module builds its page from these parts."""
